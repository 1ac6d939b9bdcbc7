/* Chunks by token budget (gc_split_by_tokens, gradcache/cache.h): the chunk boundaries the
 * budget and the chunk size give, each chunk cut to its longest row with the values kept; and a
 * GradCache step split so, its chunks' padding cut, equal to the plain step over the whole
 * padded batch (f64 to 1e-10: cutting padding that the mask already excluded changes only the
 * order of sums). */
#include "check.h"

/* ids [5, 6] i32 (row r's token t: 10 r + t) and its mask, the rows 2, 6, 1, 3 and 3 tokens long */
static const int64_t lengths[5] = {2, 6, 1, 3, 3};

static gc_batch make_batch(gc_dtype mask_dtype) {
    int32_t ids[30];
    double mask[30];
    for (int r = 0; r < 5; r++)
        for (int t = 0; t < 6; t++) ids[r * 6 + t] = 10 * r + t, mask[r * 6 + t] = t < lengths[r];
    gc_tensor *mask_f64 = gc_from_host(mask, GC_SHAPE(5, 6), GC_F64, gc_cpu());
    gc_batch batch = {2, {"ids", "mask"}, {gc_from_host(ids, GC_SHAPE(5, 6), GC_I32, gc_cpu()), gc_cast(mask_f64, mask_dtype)}};
    gc_tensor_release(mask_f64);
    return batch;
}

/* The chunks of the batch under `budget` tokens and `chunk_size` rows: their rows and widths. */
static void expect_chunks(int64_t budget, int64_t chunk_size, int count, const int64_t *rows, const int64_t *widths) {
    gc_batch batch = make_batch(GC_F32), chunks[5];
    gc_token_budget tokens = {budget, "mask"};
    int got = gc_split_by_tokens(&batch, chunk_size, chunks, 5, &tokens);
    CHECK_MSG(got == count, "budget %lld, chunk size %lld: %d chunks, want %d", (long long)budget,
              (long long)chunk_size, got, count);
    for (int c = 0, first = 0; c < got && c < count; first += (int)rows[c], c++) {
        const gc_tensor *ids = chunks[c].tensors[0];
        CHECK_MSG(ids->shape[0] == rows[c] && ids->shape[1] == widths[c] && chunks[c].tensors[1]->shape[1] == widths[c],
                  "chunk %d: [%lld, %lld], want [%lld, %lld]", c, (long long)ids->shape[0], (long long)ids->shape[1],
                  (long long)rows[c], (long long)widths[c]);
        int32_t values[30];
        gc_copy_to_host(ids, values);
        for (int64_t i = 0; i < ids->shape[0] * ids->shape[1]; i++)
            CHECK(values[i] == 10 * (first + i / ids->shape[1]) + i % ids->shape[1]);
        RELEASE(chunks[c].tensors[0], chunks[c].tensors[1]);
    }
    RELEASE(batch.tensors[0], batch.tensors[1]);
}

static void test_boundaries(void) {
    /* 2 | 6 | 1 + 3 | 3 under 6 tokens; a row longer than the budget alone */
    expect_chunks(6, 10, 4, (const int64_t[]){1, 1, 2, 1}, (const int64_t[]){2, 6, 3, 3});
    expect_chunks(3, 10, 5, (const int64_t[]){1, 1, 1, 1, 1}, (const int64_t[]){2, 6, 1, 3, 3});
    /* a budget that never binds: the chunk size does, each chunk its longest row wide */
    expect_chunks(100, 2, 3, (const int64_t[]){2, 2, 1}, (const int64_t[]){6, 3, 3});
}

static gc_tensor *text_forward(void *state, const gc_batch *chunk) {
    return gc_text_encoder_forward(state, chunk->tensors[0], chunk->tensors[1], true);
}

static void test_cache_matches_padded_batch(void) {
    gc_text_encoder_config config = {.vocab = 60, .max_length = 6, .dim = 8, .heads = 2, .layers = 2, .hidden = 16,
                                     .projection = 4, .activation = GC_ACT_GELU_ERF, .pooling = GC_POOL_MEAN,
                                     .dtype = GC_F64};
    gc_text_encoder encoder;
    gc_generator init = {5, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    gc_batch inputs[2] = {make_batch(GC_F64), make_batch(GC_F64)}; /* tied: queries and passages alike */
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_token_budget budget = {6, "mask"};
    gc_cache_config split = {.n_models = 2,
                             .models = {{&encoder, text_forward, 5, &params}, {&encoder, text_forward, 5, &params}},
                             .loss = gc_contrastive_loss_fn(&options), .split = gc_split_by_tokens, .user = &budget};
    gc_cache_config padded = split;
    padded.split = NULL, padded.user = NULL;
    gc_cache *cached = gc_cache_new(&split), *plain = gc_cache_new(&padded);
    double loss = 0, padded_loss = 0;
    REQUIRE(gc_cache_step(cached, inputs, &loss, NULL) == GC_OK);
    int64_t n = gc_param_list_numel(&params), at = 0;
    double *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
    REQUIRE(got && want);
    for (int i = 0; i < params.count; at += gc_numel(params.items[i].tensor), i++)
        gc_to_host_f64(gc_grad(params.items[i].tensor), got + at);
    gc_param_list_zero_grad(&params);
    REQUIRE(gc_cache_full_batch_step(plain, inputs, &padded_loss) == GC_OK);
    at = 0;
    double diff = 0, norm = 0;
    for (int i = 0; i < params.count; at += gc_numel(params.items[i].tensor), i++)
        gc_to_host_f64(gc_grad(params.items[i].tensor), want + at);
    for (int64_t i = 0; i < n; i++) diff += (got[i] - want[i]) * (got[i] - want[i]), norm += want[i] * want[i];
    CHECK_MSG(sqrt(diff / norm) <= 1e-10, "token chunks against the padded batch: relative error %.3g",
              sqrt(diff / norm));
    CHECK_MSG(fabs(loss - padded_loss) <= 1e-10 * fabs(padded_loss), "loss %.17g, padded %.17g", loss, padded_loss);
    free(got);
    free(want);
    gc_cache_free(cached);
    gc_cache_free(plain);
    for (int m = 0; m < 2; m++) RELEASE(inputs[m].tensors[0], inputs[m].tensors[1]);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
}

int main(void) {
    GC_TEST_CASE(test_boundaries);
    GC_TEST_CASE(test_cache_matches_padded_batch);
    return gc_test_result();
}
