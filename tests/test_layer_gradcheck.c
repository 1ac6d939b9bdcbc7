/* Finite-difference gradient checks of every layer, in f64 (see gradcheck.h for the
 * tolerance): the gradient of each parameter (all its elements, or an even sample of them
 * for the whole encoder) and of each input that requires one. The parameters are redrawn
 * from uniform(-0.5, 0.5) first: BERT's normal(0, 0.02) would make every layer nearly linear
 * (attention nearly uniform, gamma exactly 1), where a wrong rule could hide. */
#include "gradcheck.h"
#include "values.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

/* Every element of a layer's parameters; the whole encoder checks an even sample of each of
 * its parameters (every element checked costs two forwards), which keeps it well under a
 * second here and under ASan. */
#define ALL_ELEMENTS INT64_MAX
#define ENCODER_SAMPLES 8

static void randomize(const gc_param_list *params, uint64_t seed) {
    for (int i = 0; i < params->count; i++) {
        gc_tensor *t = params->items[i].tensor;
        gc_tensor *values = gc_uniform(t->ndim, t->shape, GC_F64, cpu, -0.5, 0.5, seed + (uint64_t)i, 0);
        REQUIRE(values && gc_copy_(t, values) == GC_OK);
        gc_tensor_release(values);
    }
}

/* Checks the gradients op's backward gives the parameters (up to `samples` elements each,
 * evenly spaced) and every input that requires one (all elements). */
static void check_layer(const char *name, gc_test_op op, gc_tensor *const *inputs, int n_inputs, const void *layer,
                        const gc_param_list *params, int64_t samples) {
    for (int i = 0; i < params->count; i++) {
        gc_tensor *param = params->items[i].tensor;
        int64_t n = gc_numel(param), stride = n > samples ? n / samples : 1;
        gc_test_check_leaf(name, params->items[i].name, op, inputs, layer, param, stride);
    }
    gc_test_gradcheck(name, op, inputs, n_inputs, layer);
}

/* [2, 3] with the second sequence's last token padded. */
static gc_tensor *padding_mask(void) {
    return gc_test_tensor(GC_F64, GC_SHAPE(2, 3), (const double[]){1, 1, 1, 1, 1, 0});
}

/* --- the ops under test: inputs[0] is x (or the ids), inputs[1] the mask where there is one --- */

static gc_tensor *linear_op(gc_tensor *const *inputs, const void *layer) { return gc_linear_forward(layer, inputs[0]); }

static gc_tensor *embedding_op(gc_tensor *const *inputs, const void *layer) {
    return gc_embedding_layer_forward(layer, inputs[0]);
}

static gc_tensor *layernorm_op(gc_tensor *const *inputs, const void *layer) {
    return gc_layernorm_layer_forward(layer, inputs[0]);
}

static gc_tensor *mlp_op(gc_tensor *const *inputs, const void *layer) { return gc_mlp_forward(layer, inputs[0], true); }

static gc_tensor *attention_op(gc_tensor *const *inputs, const void *layer) {
    return gc_attention_forward(layer, inputs[0], inputs[1], true);
}

static gc_tensor *encoder_layer_op(gc_tensor *const *inputs, const void *layer) {
    return gc_encoder_layer_forward(layer, inputs[0], inputs[1], true);
}

static gc_tensor *text_encoder_op(gc_tensor *const *inputs, const void *encoder) {
    return gc_text_encoder_forward(encoder, inputs[0], inputs[1], true);
}

static gc_tensor *cls_op(gc_tensor *const *inputs, const void *unused) {
    (void)unused;
    return gc_pool(inputs[0], inputs[1], GC_POOL_CLS);
}

static gc_tensor *mean_op(gc_tensor *const *inputs, const void *unused) {
    (void)unused;
    return gc_pool(inputs[0], inputs[1], GC_POOL_MEAN);
}

static gc_tensor *l2_normalize_op(gc_tensor *const *inputs, const void *unused) {
    (void)unused;
    return gc_l2_normalize(inputs[0], 1e-6);
}

/* --- the layers --- */

static void test_linear(void) {
    gc_generator init = {1, 0};
    gc_linear layer;
    REQUIRE(gc_linear_init(&layer, 3, 4, true, GC_F64, cpu, &init) == GC_OK);
    gc_param_list params = {0};
    gc_linear_params(&layer, "linear", &params);
    randomize(&params, 10);
    gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 2, 3), -1, 1, 11); /* 3-D: the rows fold and unfold */
    check_layer("linear", linear_op, &x, 1, &layer, &params, ALL_ELEMENTS);
    gc_tensor_release(x);
    gc_param_list_free(&params);
    gc_linear_free(&layer);
}

/* Repeated ids: their rows' gradients add up. */
static void test_embedding(void) {
    gc_generator init = {2, 0};
    gc_embedding_layer layer;
    REQUIRE(gc_embedding_layer_init(&layer, 5, 3, GC_F64, cpu, &init) == GC_OK);
    gc_param_list params = {0};
    gc_embedding_layer_params(&layer, "embedding", &params);
    gc_tensor *ids = gc_from_host((const int32_t[]){1, 3, 1, 0, 3, 3}, GC_SHAPE(2, 3), GC_I32, cpu);
    REQUIRE(ids);
    check_layer("embedding", embedding_op, &ids, 1, &layer, &params, ALL_ELEMENTS);
    gc_tensor_release(ids);
    gc_param_list_free(&params);
    gc_embedding_layer_free(&layer);
}

static void test_layernorm(void) {
    gc_layernorm_layer layer;
    REQUIRE(gc_layernorm_layer_init(&layer, 5, 1e-5, GC_F64, cpu) == GC_OK);
    gc_param_list params = {0};
    gc_layernorm_layer_params(&layer, "norm", &params);
    randomize(&params, 20);
    gc_tensor *x = gc_test_leaf(GC_SHAPE(3, 5), -2, 2, 21);
    check_layer("layernorm", layernorm_op, &x, 1, &layer, &params, ALL_ELEMENTS);
    gc_tensor_release(x);
    gc_param_list_free(&params);
    gc_layernorm_layer_free(&layer);
}

static void test_mlp(void) {
    const gc_activation activations[2] = {GC_ACT_GELU_ERF, GC_ACT_GELU_TANH};
    const char *names[2] = {"mlp (gelu erf)", "mlp (gelu tanh)"};
    for (int a = 0; a < 2; a++) {
        gc_generator init = {3, 0};
        gc_mlp layer;
        REQUIRE(gc_mlp_init(&layer, 3, 5, activations[a], 0, GC_F64, cpu, &init) == GC_OK);
        gc_param_list params = {0};
        gc_mlp_params(&layer, "mlp", &params);
        randomize(&params, 30);
        gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 2, 3), -1, 1, 31);
        check_layer(names[a], mlp_op, &x, 1, &layer, &params, ALL_ELEMENTS);
        gc_tensor_release(x);
        gc_param_list_free(&params);
        gc_mlp_free(&layer);
    }
}

static void test_attention(void) {
    gc_generator init = {4, 0};
    gc_attention layer;
    REQUIRE(gc_attention_init(&layer, 4, 2, 0, NULL, GC_F64, cpu, &init) == GC_OK);
    gc_param_list params = {0};
    gc_attention_params(&layer, "attention", &params);
    randomize(&params, 40);
    gc_tensor *inputs[2] = {gc_test_leaf(GC_SHAPE(2, 3, 4), -1, 1, 41), padding_mask()};
    check_layer("attention", attention_op, inputs, 2, &layer, &params, ALL_ELEMENTS);
    gc_tensor_release(inputs[0]);
    gc_tensor_release(inputs[1]);
    gc_param_list_free(&params);
    gc_attention_free(&layer);
}

static void test_encoder_layer(void) {
    for (int pre_norm = 0; pre_norm < 2; pre_norm++) {
        gc_generator init = {5, 0};
        gc_encoder_layer layer;
        gc_text_encoder_config config = {.dim = 4, .heads = 2, .hidden = 6, .activation = GC_ACT_GELU_ERF,
                                         .pre_norm = pre_norm, .dtype = GC_F64};
        REQUIRE(gc_encoder_layer_init(&layer, &config, cpu, &init) == GC_OK);
        gc_param_list params = {0};
        gc_encoder_layer_params(&layer, "layer", &params);
        randomize(&params, 50);
        gc_tensor *inputs[2] = {gc_test_leaf(GC_SHAPE(2, 3, 4), -1, 1, 51), padding_mask()};
        check_layer(pre_norm ? "pre-norm encoder layer" : "post-norm encoder layer", encoder_layer_op, inputs, 2,
                    &layer, &params, ALL_ELEMENTS);
        gc_tensor_release(inputs[0]);
        gc_tensor_release(inputs[1]);
        gc_param_list_free(&params);
        gc_encoder_layer_free(&layer);
    }
}

/* Pooling and normalisation have no parameters: the gradient w.r.t. x, with a mask that has
 * an all-padding row for MEAN (whose gradient is 0). */
static void test_pooling(void) {
    gc_param_list none = {0};
    gc_tensor *inputs[2] = {gc_test_leaf(GC_SHAPE(3, 3, 4), -1, 1, 60),
                            gc_test_tensor(GC_F64, GC_SHAPE(3, 3), (const double[]){1, 1, 0, 0, 0, 0, 1, 1, 1})};
    check_layer("cls pooling", cls_op, inputs, 2, NULL, &none, ALL_ELEMENTS);
    check_layer("masked mean pooling", mean_op, inputs, 2, NULL, &none, ALL_ELEMENTS);
    gc_tensor *unmasked[2] = {inputs[0], NULL};
    check_layer("mean pooling", mean_op, unmasked, 2, NULL, &none, ALL_ELEMENTS);
    check_layer("l2_normalize", l2_normalize_op, inputs, 1, NULL, &none, ALL_ELEMENTS);
    gc_tensor_release(inputs[0]);
    gc_tensor_release(inputs[1]);
}

/* The whole encoder, both layer orders and poolings, one with a projection; dropout 0 so
 * that the training forward is a deterministic function of the parameters. */
static void test_text_encoder(void) {
    gc_tensor *ids = gc_from_host((const int32_t[]){1, 2, 3, 4, 5, 6}, GC_SHAPE(2, 3), GC_I32, cpu);
    gc_tensor *inputs[2] = {ids, padding_mask()};
    REQUIRE(ids);
    for (int pre_norm = 0; pre_norm < 2; pre_norm++) {
        gc_text_encoder_config config = {.vocab = 7, .max_length = 4, .dim = 4, .heads = 2, .layers = 2, .hidden = 6,
                                         .projection = pre_norm ? 0 : 3, .dropout = 0, .pre_norm = pre_norm,
                                         .activation = GC_ACT_GELU_TANH,
                                         .pooling = pre_norm ? GC_POOL_MEAN : GC_POOL_CLS, .dtype = GC_F64};
        gc_generator init = {6, 0};
        gc_text_encoder encoder;
        REQUIRE(gc_text_encoder_init(&encoder, &config, cpu, &init) == GC_OK);
        gc_param_list params = {0};
        gc_text_encoder_params(&encoder, "", &params);
        randomize(&params, 70);
        check_layer(pre_norm ? "pre-norm text encoder" : "post-norm text encoder", text_encoder_op, inputs, 2,
                    &encoder, &params, ENCODER_SAMPLES);
        gc_param_list_free(&params);
        gc_text_encoder_free(&encoder);
    }
    gc_tensor_release(inputs[0]);
    gc_tensor_release(inputs[1]);
}

static gc_tensor *last_op(gc_tensor *const *inputs, const void *layer) {
    (void)layer;
    return gc_pool(inputs[0], inputs[1], GC_POOL_LAST);
}

/* A decoder-family encoder with every choice of its own at once: RMSNorms, SwiGLU, grouped-
 * query attention with a head_dim of its own, causal, rotary positions with linear scaling,
 * q/k norms, biases on q, k and v only (Qwen2's), last-token pooling; and that pooling alone
 * with right and left padding. */
static void test_decoder_encoder(void) {
    gc_text_encoder_config config = {.vocab = 7, .max_length = 4, .dim = 8, .heads = 4, .layers = 2, .hidden = 6,
                                     .pre_norm = true, .pooling = GC_POOL_LAST, .layernorm_eps = 1e-6,
                                     .dtype = GC_F64, .rms_norm = true, .gated_mlp = true, .no_mlp_bias = true,
                                     .attention = {.kv_heads = 2, .head_dim = 4, .causal = true, .rope_theta = 100,
                                                   .rope_scale = 2, .qk_norm_eps = 1e-6, .no_output_bias = true}};
    gc_tensor *ids = gc_from_host((const int32_t[]){1, 2, 3, 4, 5, 6}, GC_SHAPE(2, 3), GC_I32, cpu);
    gc_tensor *left = gc_test_tensor(GC_F64, GC_SHAPE(2, 3), (const double[]){1, 1, 1, 0, 1, 1});
    gc_tensor *inputs[2] = {ids, padding_mask()};
    gc_generator init = {9, 0};
    gc_text_encoder encoder;
    REQUIRE(ids && gc_text_encoder_init(&encoder, &config, cpu, &init) == GC_OK);
    gc_param_list params = {0}, none = {0};
    gc_text_encoder_params(&encoder, "", &params);
    randomize(&params, 90);
    check_layer("decoder text encoder", text_encoder_op, inputs, 2, &encoder, &params, ENCODER_SAMPLES);
    gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 3, 4), -1, 1, 91);
    check_layer("last-token pooling, right padding", last_op, (gc_tensor *[]){x, inputs[1]}, 2, NULL, &none,
                ALL_ELEMENTS);
    check_layer("last-token pooling, left padding", last_op, (gc_tensor *[]){x, left}, 2, NULL, &none, ALL_ELEMENTS);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
    RELEASE(ids, left, inputs[1], x);
}

int main(void) {
    size_t start = gc_memory_get_stats(cpu).live_bytes;
    test_linear();
    test_embedding();
    test_layernorm();
    test_mlp();
    test_attention();
    test_encoder_layer();
    test_pooling();
    test_text_encoder();
    test_decoder_encoder();
    CHECK(gc_memory_get_stats(cpu).live_bytes == start);
    return gc_test_result();
}
