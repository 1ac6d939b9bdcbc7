/* The text encoder packs a padded batch's real tokens (nn/layers/token_packing.c): the
 * packing's round trip; no packing where nothing is padded; the pooled output bit for bit the
 * padded forward's, in inference and in training with and without a graph (dropout drawn by
 * position) (each real token's row is computed by the same per-row arithmetic either way),
 * for BERT-shaped (post-norm, CLS and mean pooling, a projection) and decoder-shaped encoders
 * (pre-norm RMSNorm, causal GQA with rotary positions, last-token pooling), padded on the
 * right and on the left; a packed graph's gradients the padded graph's, up to the grouping of
 * the sums over rows; and that the padding is really skipped: a mostly padded batch peaks far
 * below the padded forward, with a graph and without. */
#include "check.h"
#include "nn/layers/layer_util.h"

enum { B = 3, T = 6 };

/* mask [B, T]: sequences of 6, 2 and 1 real tokens, on the right or (decoders) on the left. */
static gc_tensor *mask_of(bool left, gc_dtype dtype) {
    static const int lengths[B] = {6, 2, 1};
    double values[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) values[b * T + t] = left ? t >= T - lengths[b] : t < lengths[b];
    gc_tensor *exact = gc_from_host(values, GC_SHAPE(B, T), GC_F64, gc_cpu());
    gc_tensor *mask = gc_cast(exact, dtype);
    REQUIRE(mask);
    gc_tensor_release(exact);
    return mask;
}

static void test_round_trip(void) {
    gc_tensor *mask = mask_of(false, GC_F32);
    gc_token_packing packing;
    REQUIRE(gc_token_packing_make(mask, &packing));
    CHECK(packing.batch == B && packing.length == T && packing.tokens == 9);
    gc_tensor *x = gc_test_random(GC_SHAPE(B, T, 4), GC_F32, 2);
    gc_tensor *packed = gc_tokens_pack(x, &packing), *back = gc_tokens_unpack(packed, &packing);
    REQUIRE(packed && back);
    CHECK(packed->ndim == 2 && packed->shape[0] == 9 && packed->shape[1] == 4);
    /* back = x on the real tokens, 0 on the padding */
    gc_tensor *keep = gc_reshape(mask, GC_SHAPE(B, T, 1)), *want = gc_mul(x, keep);
    gc_test_expect_close(want, back, 0, 0, "unpack(pack(x))");
    RELEASE(packed, back, keep, want, x, mask);
    gc_token_packing_free(&packing);

    /* nothing padded: nothing to pack */
    gc_tensor *full = gc_ones(GC_SHAPE(B, T), GC_F32, gc_cpu());
    CHECK(!gc_token_packing_make(full, &packing));
    gc_tensor_release(full);
}

static gc_text_encoder_config bert_config(bool pre_norm, gc_pooling pooling, int64_t projection) {
    return (gc_text_encoder_config){.vocab = 11, .max_length = T, .dim = 8, .heads = 2, .layers = 2, .hidden = 12,
                                    .projection = projection, .dropout = 0.1, .pre_norm = pre_norm,
                                    .activation = GC_ACT_GELU_ERF, .pooling = pooling, .dtype = GC_F32};
}

static gc_text_encoder_config decoder_config(void) {
    return (gc_text_encoder_config){.vocab = 11, .max_length = T, .dim = 8, .heads = 4, .layers = 2, .hidden = 12,
                                    .pre_norm = true, .pooling = GC_POOL_LAST, .layernorm_eps = 1e-6,
                                    .dtype = GC_F32, .rms_norm = true, .gated_mlp = true, .no_mlp_bias = true,
                                    .normalize = true,
                                    .attention = {.kv_heads = 2, .causal = true, .rope_theta = 10000,
                                                  .qk_norm_eps = 1e-6, .no_qkv_bias = true, .no_output_bias = true}};
}

/* What gc_text_encoder_forward computes, through the padded hidden states. */
static gc_tensor *padded_forward(const gc_text_encoder *encoder, const gc_tensor *ids, const gc_tensor *mask,
                                 bool training) {
    const gc_text_encoder_config *c = &encoder->config;
    gc_tensor *h = gc_text_encoder_hidden(encoder, ids, mask, training);
    h = gc_nn_then(h, gc_pool(h, mask, c->pooling));
    if (c->projection) h = gc_nn_then(h, gc_linear_forward(&encoder->projection, h));
    if (c->normalize) h = gc_nn_then(h, gc_l2_normalize(h, 1e-12));
    return h;
}

static void check_encoder(const gc_text_encoder_config *config, bool left, const char *what) {
    gc_text_encoder encoder;
    gc_generator init = {17, 0};
    REQUIRE(gc_text_encoder_init(&encoder, config, gc_cpu(), &init) == GC_OK);
    gc_tensor *ids = gc_test_random_in(GC_SHAPE(B, T), GC_I32, 0, 11, 3), *mask = mask_of(left, config->dtype);
    gc_tensor *want = padded_forward(&encoder, ids, mask, false),
              *got = gc_text_encoder_forward(&encoder, ids, mask, false);
    REQUIRE(want && got);
    gc_test_expect_close(want, got, 0, 0, what);
    RELEASE(want, got, ids, mask);
    gc_text_encoder_free(&encoder);
}

static void test_encoders(void) {
    gc_text_encoder_config cls = bert_config(false, GC_POOL_CLS, 5), mean = bert_config(true, GC_POOL_MEAN, 0);
    gc_text_encoder_config decoder = decoder_config();
    check_encoder(&cls, false, "BERT-shaped, post-norm, CLS, projection");
    check_encoder(&mean, false, "pre-norm, mean pooling");
    check_encoder(&decoder, false, "decoder-shaped, last token, padded on the right");
    check_encoder(&decoder, true, "decoder-shaped, last token, padded on the left");
}

/* In training, a forward packs with a graph and without (GradCache's first pass over a
 * chunk), each real token dropped with its position's mask: the output bit for bit that of
 * the padded forward, and the generator left where that one leaves it. */
static void check_training_on(const gc_text_encoder_config *config, gc_tensor *ids, gc_tensor *mask,
                              const char *what) {
    gc_text_encoder encoder;
    gc_generator init = {19, 0};
    REQUIRE(gc_text_encoder_init(&encoder, config, gc_cpu(), &init) == GC_OK);
    gc_manual_seed(23);
    gc_tensor *padded = padded_forward(&encoder, ids, mask, true);
    uint64_t padded_after = gc_default_generator(gc_cpu())->offset;
    REQUIRE(padded);
    for (int graph = 0; graph < 2; graph++) {
        gc_manual_seed(23);
        bool previous = gc_set_grad_enabled(graph);
        gc_tensor *out = gc_text_encoder_forward(&encoder, ids, mask, true);
        gc_set_grad_enabled(previous);
        uint64_t after = gc_default_generator(gc_cpu())->offset;
        REQUIRE(out);
        char name[160];
        snprintf(name, sizeof name, "%s, %s", what, graph ? "with a graph" : "without a graph");
        gc_test_expect_close(padded, out, 0, 0, name);
        CHECK_MSG(after == padded_after, "%s: the generator is at %llu after the packed forward, %llu after the padded",
                  name, (unsigned long long)after, (unsigned long long)padded_after);
        gc_tensor_release(out);
    }
    /* and the masks are really drawn: another seed gives another output */
    gc_manual_seed(24);
    gc_tensor *other = gc_text_encoder_forward(&encoder, ids, mask, true), *change = gc_sub(other, padded);
    REQUIRE(other && change);
    CHECK_MSG(gc_test_largest_abs(change) > 0, "%s: dropout drew nothing", what);
    RELEASE(padded, other, change, ids, mask);
    gc_text_encoder_free(&encoder);
}

static void check_training(const gc_text_encoder_config *config, bool left, const char *what) {
    check_training_on(config, gc_test_random_in(GC_SHAPE(B, T), GC_I32, 0, 11, 5), mask_of(left, config->dtype),
                      what);
}

typedef void (*shape_check)(const gc_text_encoder_config *config, bool left, const char *what);

/* `check` on the three shapes trained here: BERT-shaped (post-norm, CLS, a projection),
 * pre-norm with mean pooling, and decoder-shaped padded on the left (dropout 0.2: the
 * decoders' default is none), each named after `kind`. */
static void on_training_shapes(shape_check check, const char *kind) {
    gc_text_encoder_config cls = bert_config(false, GC_POOL_CLS, 5), mean = bert_config(true, GC_POOL_MEAN, 0);
    gc_text_encoder_config decoder = decoder_config();
    decoder.dropout = 0.2;
    const struct {
        const gc_text_encoder_config *config;
        bool left;
        const char *name;
    } shapes[] = {{&cls, false, "BERT-shaped, post-norm, CLS, projection"},
                  {&mean, false, "pre-norm, mean pooling"},
                  {&decoder, true, "decoder-shaped, padded on the left"}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s: %s", kind, shapes[i].name);
        check(shapes[i].config, shapes[i].left, what);
    }
}

static void test_training(void) {
    on_training_shapes(check_training, "training");
    /* a chunk of the benchmarks' tiny model: products of many row blocks, split over threads */
    enum { CHUNK = 32, LENGTH = 32 };
    gc_text_encoder_config tiny = bert_config(false, GC_POOL_MEAN, 0);
    tiny.vocab = 300, tiny.max_length = LENGTH, tiny.dim = 64, tiny.heads = 4, tiny.hidden = 128;
    float mask_values[CHUNK * LENGTH];
    for (int i = 0; i < CHUNK * LENGTH; i++) mask_values[i] = i % LENGTH < 1 + (i / LENGTH * 7) % LENGTH;
    check_training_on(&tiny, gc_test_random_in(GC_SHAPE(CHUNK, LENGTH), GC_I32, 0, 300, 7),
                      gc_from_host(mask_values, GC_SHAPE(CHUNK, LENGTH), GC_F32, gc_cpu()),
                      "training: the tiny model, a chunk of 32 texts of up to 32 tokens");
}

/* The parameters' gradients of sum(forward * weights) from a forward with a graph, packed
 * (gc_text_encoder_forward) or padded, from the same seed: copies, in the encoder's order. */
static int graph_gradients(const gc_text_encoder *encoder, const gc_param_list *params, const gc_tensor *ids,
                           const gc_tensor *mask, bool packed, gc_tensor **grads) {
    gc_param_list_zero_grad(params);
    gc_manual_seed(31);
    gc_tensor *out = packed ? gc_text_encoder_forward(encoder, ids, mask, true) : padded_forward(encoder, ids, mask, true);
    REQUIRE(out);
    gc_tensor *weights = gc_test_random(out->ndim, out->shape, out->dtype, 37);
    gc_tensor *product = gc_mul(out, weights), *loss = gc_sum_all(product);
    REQUIRE(loss && gc_backward(&loss, NULL, 1) == GC_OK);
    for (int i = 0; i < params->count; i++) {
        gc_tensor *grad = gc_grad(params->items[i].tensor);
        REQUIRE(grad);
        grads[i] = gc_clone(grad);
    }
    RELEASE(out, weights, product, loss);
    return params->count;
}

/* A packed graph leaves the padding's rows out of the sums over rows (the weights', biases'
 * and norms' gradients), where the padded graph adds exact zeros for them: the gradients
 * agree up to the grouping of those sums. f64 makes that a tight bound (1e-12 relative,
 * against sums of a few dozen terms of about 1), and the gradients are not 0 (the check is
 * not vacuous); a packing whose backward misplaces a row fails it by far. */
static void check_gradients(const gc_text_encoder_config *config, bool left, const char *what) {
    gc_text_encoder_config c64 = *config;
    c64.dtype = GC_F64;
    gc_text_encoder encoder;
    gc_generator init = {41, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &c64, gc_cpu(), &init) == GC_OK);
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    REQUIRE(params.count <= 64);
    gc_tensor *ids = gc_test_random_in(GC_SHAPE(B, T), GC_I32, 0, 11, 8), *mask = mask_of(left, GC_F64);
    gc_tensor *padded[64], *packed[64];
    graph_gradients(&encoder, &params, ids, mask, false, padded);
    graph_gradients(&encoder, &params, ids, mask, true, packed);
    double largest = 0;
    for (int i = 0; i < params.count; i++) {
        char name[200];
        snprintf(name, sizeof name, "%s: the gradient of %s", what, params.items[i].name);
        gc_test_expect_close(padded[i], packed[i], 1e-13, 1e-12, name);
        double size = gc_test_largest_abs(padded[i]);
        largest = size > largest ? size : largest;
        RELEASE(padded[i], packed[i]);
    }
    CHECK_MSG(largest > 1e-3, "%s: the largest gradient is %g", what, largest);
    RELEASE(ids, mask);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
}

static void test_graph_gradients(void) { on_training_shapes(check_gradients, "graph"); }

/* Checkpointed layers (gc_text_encoder.checkpoint_layers) in an inference forward: packed,
 * and not checkpointed (no graph to save memory in), the same output as without. */
static void test_checkpointed_layers(void) {
    gc_text_encoder_config config = bert_config(false, GC_POOL_MEAN, 0);
    gc_text_encoder encoder;
    gc_generator init = {29, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    gc_tensor *ids = gc_test_random_in(GC_SHAPE(B, T), GC_I32, 0, 11, 6), *mask = mask_of(false, GC_F32);
    gc_tensor *want = gc_text_encoder_forward(&encoder, ids, mask, false);
    encoder.checkpoint_layers = true;
    gc_tensor *got = gc_text_encoder_forward(&encoder, ids, mask, false);
    REQUIRE(want && got);
    gc_test_expect_close(want, got, 0, 0, "inference with checkpointed layers");
    RELEASE(want, got, ids, mask);
    gc_text_encoder_free(&encoder);
}

/* The peak of one forward of ids with mask, above what was live before it: padded or packed
 * (gc_text_encoder_forward), with a graph (kept until the peak is read) or without. */
static size_t forward_peak(const gc_text_encoder *encoder, const gc_tensor *ids, const gc_tensor *mask, bool packed,
                           bool training, bool graph) {
    size_t before = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_memory_reset_peak(gc_cpu());
    bool previous = gc_set_grad_enabled(graph);
    gc_tensor *y = packed ? gc_text_encoder_forward(encoder, ids, mask, training)
                          : padded_forward(encoder, ids, mask, training);
    gc_set_grad_enabled(previous);
    REQUIRE(y);
    size_t peak = gc_memory_get_stats(gc_cpu()).peak_bytes - before;
    gc_tensor_release(y);
    return peak;
}

/* 16 sequences of 64 positions with one real token each: the packed forward's MLP holds 16
 * rows where the padded one holds 1024 (what still peaks is attention, padded either way:
 * measured 1.06 MB packed against 2.17 MB padded without a graph, 2.47 against 6.95 MB with
 * one). */
static void test_padding_skipped(void) {
    gc_text_encoder_config config = bert_config(false, GC_POOL_MEAN, 0);
    config.max_length = 64;
    config.hidden = 256;
    gc_text_encoder encoder;
    gc_generator init = {5, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    double mask_values[16 * 64] = {0};
    for (int b = 0; b < 16; b++) mask_values[b * 64] = 1;
    gc_tensor *mask = gc_from_host(mask_values, GC_SHAPE(16, 64), GC_F64, gc_cpu());
    gc_tensor *mask_f32 = gc_cast(mask, GC_F32), *ids = gc_test_random_in(GC_SHAPE(16, 64), GC_I32, 0, 11, 4);
    static const struct {
        bool training, graph;
        const char *what;
    } runs[] = {{false, false, "inference"}, {true, false, "training without a graph"}, {true, true, "training with a graph"}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        size_t padded = forward_peak(&encoder, ids, mask_f32, false, runs[r].training, runs[r].graph);
        size_t packed = forward_peak(&encoder, ids, mask_f32, true, runs[r].training, runs[r].graph);
        printf("%s: peak %zu bytes packed, %zu padded\n", runs[r].what, packed, padded);
        CHECK_MSG(packed * 2 < padded, "the packed forward (%s) peaked at %zu bytes, the padded one at %zu",
                  runs[r].what, packed, padded);
    }
    RELEASE(mask, mask_f32, ids);
    gc_text_encoder_free(&encoder);
}

int main(void) {
    GC_TEST_CASE(test_round_trip);
    GC_TEST_CASE(test_encoders);
    GC_TEST_CASE(test_training);
    GC_TEST_CASE(test_graph_gradients);
    GC_TEST_CASE(test_checkpointed_layers);
    GC_TEST_CASE(test_padding_skipped);
    return gc_test_result();
}
