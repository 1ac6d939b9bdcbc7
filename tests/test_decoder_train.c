/* A pretrained decoder-family model (tests/fixtures/tiny_qwen3: GQA, q/k norms, last-token
 * pooling, normalised) trained through the library:
 *  - GradCache: the cached step's gradients equal the full batch's (gc_cache_verify) in f64
 *    to 1e-10 and in f32 to 1e-5 (invariant 3), the query tower prompted;
 *  - bf16 and f16 (with the loss scaler) with f32 master weights: a few AdamW steps lower the
 *    loss as f32's do, the first loss within the 16-bit type's rounding of f32's;
 *  - saved back as a folder (gc_pretrained_save) that gc_pretrained_load reads to the same
 *    embeddings, bitwise. (tests/test_decoder_transformers.sh loads it with transformers.) */
#include <math.h>
#include <unistd.h>

#include "checkpoint_files.h"
#include "check.h"

#define FOLDER GC_TEST_FIXTURES "/tiny_qwen3"

static const char *const queries[] = {"where is the cat", "naïve café", "東京 123", "a mat", "what is retrieval",
                                      "gradient cache"};
static const char *const passages[] = {"the cat sat on the mat", "a café in Paris", "Tokyo has 14 million",
                                       "mats are flat", "finding passages for a query", "chunks of a batch"};

typedef struct run {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused;
    gc_param_list params;
    gc_batch inputs[2];
    gc_tensor *tensors[4]; /* q ids, q mask, p ids, p mask */
} run;

static gc_tensor *forward(void *state, const gc_batch *chunk) {
    return gc_text_encoder_forward(state, chunk->tensors[0], chunk->tensors[1], true);
}

static void open_run(run *r, gc_dtype dtype) {
    gc_text_encoder_config config;
    REQUIRE(gc_pretrained_read_config(FOLDER, &config) == GC_OK);
    config.dtype = dtype;
    gc_generator init = {1, 0};
    REQUIRE(gc_text_encoder_init(&r->encoder, &config, gc_cpu(), &init) == GC_OK);
    REQUIRE(gc_pretrained_load_weights(FOLDER, &r->encoder, &r->unused) == GC_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", FOLDER);
    REQUIRE(gc_tokenizer_load(path, &r->tokenizer) == GC_OK);
    r->params = (gc_param_list){0};
    gc_text_encoder_params(&r->encoder, "", &r->params);
    char *prompt;
    REQUIRE(gc_pretrained_prompt(FOLDER, "query", &prompt) == GC_OK && prompt);
    /* 64 tokens, the fixture's positions: its small vocabulary spends 32 on the prompt alone */
    REQUIRE(gc_tokenize_prompted(r->tokenizer, prompt, queries, 6, 64, GC_PAD_TO_LONGEST, dtype, gc_cpu(),
                                 &r->tensors[0], &r->tensors[1]) == GC_OK);
    REQUIRE(gc_tokenize(r->tokenizer, passages, 6, 32, GC_PAD_TO_LONGEST, dtype, gc_cpu(), &r->tensors[2],
                        &r->tensors[3]) == GC_OK);
    free(prompt);
    r->inputs[0] = (gc_batch){2, {"ids", "mask"}, {r->tensors[0], r->tensors[1]}};
    r->inputs[1] = (gc_batch){2, {"ids", "mask"}, {r->tensors[2], r->tensors[3]}};
}

static void close_run(run *r) {
    RELEASE(r->tensors[0], r->tensors[1], r->tensors[2], r->tensors[3]);
    gc_param_list_free(&r->params);
    gc_bert_unused_free(&r->unused);
    gc_tokenizer_free(r->tokenizer);
    gc_text_encoder_free(&r->encoder);
}

/* One tied encoder, chunks of 2 and 4 (an uneven last chunk). */
static gc_cache *make_cache(run *r, const gc_loss_scaler *scaler) {
    static gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_cache_config config = {.n_models = 2,
                              .models = {{&r->encoder, forward, 2, &r->params}, {&r->encoder, forward, 4, &r->params}},
                              .loss = gc_contrastive_loss_fn(&options), .scaler = scaler};
    return gc_cache_new(&config);
}

static void test_verify(void) {
    const gc_dtype dtypes[2] = {GC_F64, GC_F32};
    const double bounds[2] = {1e-10, 1e-5};
    for (int d = 0; d < 2; d++) {
        run r;
        open_run(&r, dtypes[d]);
        gc_cache *cache = make_cache(&r, NULL);
        double worst = 1;
        REQUIRE(gc_cache_verify(cache, r.inputs, dtypes[d] == GC_F64 ? 1e-12 : 1e-6, &worst, NULL, 0) == GC_OK);
        CHECK_MSG(worst <= bounds[d], "%s: largest relative gradient difference %.3g", gc_dtype_name(dtypes[d]), worst);
        gc_cache_free(cache);
        close_run(&r);
    }
}

/* `steps` AdamW steps of the cached step in `dtype` (f16 with the loss scaler); the losses. */
static void train(gc_dtype dtype, int steps, double *losses, run *r) {
    open_run(r, dtype);
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 1024; /* 2^16 overflows this model's f16 gradients: backing off would skip the first steps */
    gc_cache *cache = make_cache(r, dtype == GC_F16 ? &scaler : NULL);
    gc_adamw opt;
    REQUIRE(gc_adamw_init(&opt, &r->params, 3e-4, 0.9, 0.999, 1e-6, 0.01) == GC_OK);
    for (int step = 0; step < steps; step++) {
        gc_param_list_zero_grad(&r->params);
        REQUIRE(gc_cache_step(cache, r->inputs, &losses[step], NULL) == GC_OK);
        bool found_inf = false;
        if (dtype == GC_F16) REQUIRE(gc_loss_scaler_check_grads(&r->params, &found_inf) == GC_OK);
        if (!found_inf) REQUIRE(gc_adamw_step_scaled(&opt, dtype == GC_F16 ? 1 / scaler.scale : 1) == GC_OK);
        if (dtype == GC_F16) gc_loss_scaler_update(&scaler, found_inf);
    }
    bool masters = true;
    for (int i = 0; i < r->params.count; i++) masters = masters && (dtype == GC_F32) == (opt.master[i] == NULL);
    CHECK_MSG(masters, "%s: f32 masters for every 16-bit parameter and none for f32", gc_dtype_name(dtype));
    gc_adamw_free(&opt);
    gc_cache_free(cache);
}

static void test_half_precision(void) {
    double reference[4];
    run f32;
    train(GC_F32, 4, reference, &f32);
    CHECK_MSG(reference[3] < reference[0], "f32: loss %g then %g", reference[0], reference[3]);
    close_run(&f32);
    const gc_dtype halves[2] = {GC_BF16, GC_F16};
    for (int h = 0; h < 2; h++) {
        double losses[4];
        run r;
        train(halves[h], 4, losses, &r);
        /* the first loss is f32's up to the 16-bit weights and activations: a few steps of the type */
        double u = halves[h] == GC_BF16 ? 0x1p-8 : 0x1p-11;
        CHECK_MSG(fabs(losses[0] - reference[0]) <= 64 * u * fabs(reference[0]), "%s: first loss %g against f32's %g",
                  gc_dtype_name(halves[h]), losses[0], reference[0]);
        CHECK_MSG(isfinite(losses[3]) && losses[3] < losses[0], "%s: loss %g then %g", gc_dtype_name(halves[h]),
                  losses[0], losses[3]);
        close_run(&r);
    }
}

/* Trained, saved, loaded again: the same embeddings bitwise. Saved at `keep` when given (argv[1]:
 * test_decoder_transformers.sh loads it with transformers). */
static void test_save(const char *keep) {
    double losses[2];
    run r;
    train(GC_F32, 2, losses, &r);
    char scratch[PATH_MAX], folder[PATH_MAX + 16];
    gc_test_make_folder(scratch);
    snprintf(folder, sizeof folder, "%s", keep ? keep : scratch);
    if (!keep) strcat(folder, "/saved");
    REQUIRE(gc_pretrained_save(folder, &r.encoder, &r.unused, FOLDER) == GC_OK);
    CHECK(gc_pretrained_save(folder, &r.encoder, &r.unused, FOLDER) == GC_ERR_IO); /* never over a folder */
    gc_clear_error();
    gc_text_encoder loaded;
    gc_tokenizer *tokenizer;
    REQUIRE(gc_pretrained_load(folder, gc_cpu(), &loaded, &tokenizer, NULL) == GC_OK);
    CHECK(loaded.config.normalize && loaded.config.pooling == GC_POOL_LAST);
    gc_tensor *want = gc_encode_texts(&r.encoder, r.tokenizer, passages, 6, 32, 3);
    gc_tensor *got = gc_encode_texts(&loaded, tokenizer, passages, 6, 32, 3);
    gc_test_expect_close(want, got, 0, 0, "saved and loaded again");
    RELEASE(want, got);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&loaded);
    close_run(&r);
    gc_folder_remove(scratch);
}

/* The trainer's model of the folder (gc_dual_encoder_from_folder): one tied encoder in bf16, the
 * folder's tokenizer and prompts, which gc_dual_encoder_encode puts before each side's texts. */
static void test_dual_encoder(void) {
    gc_dual_encoder model;
    REQUIRE(gc_dual_encoder_from_folder(&model, FOLDER, 64, GC_BF16, gc_cpu()) == GC_OK); /* room after the prompt */
    char *prompt;
    REQUIRE(gc_pretrained_prompt(FOLDER, "query", &prompt) == GC_OK && prompt);
    CHECK(model.tied && model.towers[0].config.dtype == GC_BF16 && model.max_length == 64);
    CHECK(model.prompts[0] && strcmp(model.prompts[0], prompt) == 0);
    CHECK(model.prompts[1] && model.prompts[1][0] == '\0'); /* the fixture's "document": "" */
    gc_tensor *got = gc_dual_encoder_encode(&model, 0, queries, 6, 4);
    gc_tensor *want = gc_encode_texts_prompted(&model.towers[0], model.tokenizer, prompt, queries, 6, 64, 4);
    gc_tensor *bare = gc_encode_texts(&model.towers[0], model.tokenizer, queries, 6, 64, 4);
    REQUIRE(got && want && bare);
    gc_test_expect_close(want, got, 0, 0, "queries encoded after the folder's prompt");
    double with[6 * 32], without[6 * 32], moved = 0; /* [6, 32]: the fixture's width */
    REQUIRE(gc_numel(got) == 6 * 32);
    gc_to_host_f64(got, with);
    gc_to_host_f64(bare, without);
    for (int i = 0; i < 6 * 32; i++) moved = fmax(moved, fabs(with[i] - without[i]));
    CHECK_MSG(moved > 1e-2, "the prompt moved the unit-length embeddings by %g only", moved);
    RELEASE(got, want, bare);
    free(prompt);
    gc_dual_encoder_free(&model);
    /* in 32 tokens the prompt leaves no room for a query: refused, not encoded */
    REQUIRE(gc_dual_encoder_from_folder(&model, FOLDER, 32, GC_F32, gc_cpu()) == GC_OK);
    CHECK(gc_dual_encoder_encode(&model, 0, queries, 6, 4) == NULL && gc_last_status() == GC_ERR_CONFIG);
    CHECK(strstr(gc_last_error(), "config_sentence_transformers.json: the query prompt is 32 tokens or more"));
    gc_clear_error();
    gc_dual_encoder_free(&model);
}

int main(int argc, char **argv) {
    if (argc > 1) { /* test_decoder_transformers.sh: only the saved folder, at argv[1] */
        test_save(argv[1]);
        return gc_test_result();
    }
    GC_TEST_CASE(test_verify);
    GC_TEST_CASE(test_half_precision);
    GC_TEST_CASE(test_dual_encoder);
    test_save(NULL);
    CHECK_MSG(gc_memory_get_stats(gc_cpu()).live_bytes == 0, "tensors left alive");
    return gc_test_result();
}
