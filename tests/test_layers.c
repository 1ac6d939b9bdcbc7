/* The layers on the CPU: hand-computed values for the small ones, a double-precision
 * reference for attention, the parameter names, the initialisation, pooling, padding and
 * dropout behaviour of the encoder, the programmer errors, and clean failure (nothing left
 * allocated) when memory runs out in init or forward. */
#include "check.h"
#include "values.h"

/* f32 results of a few ops over values that are not exact in f32: each op rounds once
 * (2^-24 relative) and the elementwise kernels compute in f32, so a handful of f32 ulps;
 * 1e-6 relative is a few times that and far below any formula error. */
#define F32_TOLERANCE 1e-6
/* f64 against a reference computed in double in another order: ~1e-16 per op. */
#define F64_TOLERANCE 1e-12

static const gc_device cpu = {GC_DEVICE_CPU, 0};

static size_t live_bytes(void) { return gc_memory_get_stats(cpu).live_bytes; }

static void release_all(gc_tensor **tensors, size_t count) {
    for (size_t i = 0; i < count; i++) gc_tensor_release(tensors[i]);
}

/* Overwrites a CPU tensor with `values` (numel of them, rounded to its dtype). */
static void set_values(gc_tensor *t, const double *values) {
    gc_tensor *source = gc_test_tensor(t->dtype, t->ndim, t->shape, values);
    REQUIRE(gc_copy_(t, source) == GC_OK);
    gc_tensor_release(source);
}

static void set_constant(gc_tensor *t, double value) {
    gc_tensor *source = gc_full(t->ndim, t->shape, t->dtype, cpu, value);
    REQUIRE(source && gc_copy_(t, source) == GC_OK);
    gc_tensor_release(source);
}

static gc_tensor *ids_tensor(int64_t batch, int64_t length, const int32_t *ids) {
    gc_tensor *t = gc_from_host(ids, GC_SHAPE(batch, length), GC_I32, cpu);
    REQUIRE(t);
    return t;
}

/* The encoder every encoder test starts from: tiny, with the sizes of a real one's parts. */
static gc_text_encoder_config small_config(bool pre_norm, gc_pooling pooling, int64_t projection, double dropout) {
    return (gc_text_encoder_config){.vocab = 11, .max_length = 6, .dim = 8, .heads = 2, .layers = 2,
                                    .hidden = 12, .projection = projection, .dropout = dropout,
                                    .pre_norm = pre_norm, .activation = GC_ACT_GELU_ERF, .pooling = pooling,
                                    .dtype = GC_F32};
}

static void init_encoder(gc_text_encoder *encoder, const gc_text_encoder_config *config, uint64_t seed) {
    gc_generator init = {seed, 0};
    REQUIRE(gc_text_encoder_init(encoder, config, cpu, &init) == GC_OK);
}

/* --- activations, Linear, Embedding, LayerNorm, MLP: hand values --- */

static void test_activations(void) {
    const double x_values[5] = {-2, -0.5, 0, 0.75, 3};
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(5), x_values);
    double erf_want[5], tanh_want[5], relu_want[5], plain_tanh[5];
    for (int i = 0; i < 5; i++) {
        double v = x_values[i];
        erf_want[i] = 0.5 * v * (1 + erf(v / sqrt(2)));
        tanh_want[i] = 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
        relu_want[i] = v > 0 ? v : 0;
        plain_tanh[i] = tanh(v);
    }
    const gc_activation activations[4] = {GC_ACT_GELU_ERF, GC_ACT_GELU_TANH, GC_ACT_RELU, GC_ACT_TANH};
    const double *wants[4] = {erf_want, tanh_want, relu_want, plain_tanh};
    const char *names[4] = {"gelu_erf", "gelu_tanh", "relu", "tanh"};
    for (int a = 0; a < 4; a++) {
        gc_tensor *y = gc_activate(x, activations[a]);
        gc_test_expect_values(y, GC_F32, GC_SHAPE(5), wants[a], 1e-7, F32_TOLERANCE, names[a]);
        gc_tensor_release(y);
    }
    CHECK(gc_activate(NULL, GC_ACT_RELU) == NULL);
    gc_tensor_release(x);
}

/* y = x W^T + b on a 3-D x (the leading dims fold into rows and back); small integers and
 * halves, so every value is exact in f32. */
static void test_linear(void) {
    gc_generator init = {1, 0};
    gc_linear layer, plain;
    REQUIRE(gc_linear_init(&layer, 3, 2, true, GC_F32, cpu, &init) == GC_OK);
    set_values(layer.weight, (const double[]){1, 2, 3, 4, 5, 6});
    set_values(layer.bias, (const double[]){0.5, -1});
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 1, 3), (const double[]){1, 0, -1, 2, 1, 0.5});
    gc_tensor *y = gc_linear_forward(&layer, x);
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 1, 2), (const double[]){-1.5, -3, 6, 15}, 0, 0, "linear");

    REQUIRE(gc_linear_init(&plain, 2, 1, false, GC_F32, cpu, &init) == GC_OK);
    CHECK(plain.bias == NULL);
    set_values(plain.weight, (const double[]){2, -1});
    gc_tensor *rows = gc_test_tensor(GC_F32, GC_SHAPE(3, 2), (const double[]){1, 1, 2, 0, 0, 3});
    gc_tensor *plain_y = gc_linear_forward(&plain, rows);
    gc_test_expect_values(plain_y, GC_F32, GC_SHAPE(3, 1), (const double[]){1, 4, -3}, 0, 0, "linear without bias");
    CHECK(gc_linear_forward(&layer, NULL) == NULL);

    gc_param_list list = {0};
    gc_linear_params(&layer, "fc", &list);
    gc_linear_params(&plain, "", &list);
    CHECK(list.count == 3);
    CHECK(strcmp(list.items[0].name, "fc.weight") == 0 && !list.items[0].no_decay);
    CHECK(strcmp(list.items[1].name, "fc.bias") == 0 && list.items[1].no_decay);
    CHECK(strcmp(list.items[2].name, "weight") == 0 && list.items[2].tensor == plain.weight);
    gc_param_list_free(&list);
    release_all((gc_tensor *[]){x, y, rows, plain_y}, 4);
    gc_linear_free(&layer);
    gc_linear_free(&plain);
    CHECK(layer.weight == NULL && layer.bias == NULL);
}

static void test_embedding(void) {
    gc_generator init = {2, 0};
    gc_embedding_layer layer;
    REQUIRE(gc_embedding_layer_init(&layer, 4, 2, GC_F32, cpu, &init) == GC_OK);
    set_values(layer.weight, (const double[]){0, 1, 10, 11, 20, 21, 30, 31});
    gc_tensor *ids = ids_tensor(2, 2, (const int32_t[]){3, 0, 1, 3});
    gc_tensor *y = gc_embedding_layer_forward(&layer, ids);
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 2, 2), (const double[]){30, 31, 0, 1, 10, 11, 30, 31}, 0, 0,
                          "embedding");
    gc_param_list list = {0};
    gc_embedding_layer_params(&layer, "tokens", &list);
    CHECK(list.count == 1 && strcmp(list.items[0].name, "tokens.weight") == 0 && !list.items[0].no_decay);
    gc_param_list_free(&list);
    release_all((gc_tensor *[]){ids, y}, 2);
    gc_embedding_layer_free(&layer);
}

/* Rows [1, 2, 3, 4] (mean 2.5, biased variance 1.25) and [-1, 0, 0, 1] (mean 0, variance 0.5). */
static void test_layernorm(void) {
    const double eps = 1e-5;
    gc_layernorm_layer layer;
    REQUIRE(gc_layernorm_layer_init(&layer, 4, eps, GC_F32, cpu) == GC_OK);
    gc_test_expect_values(layer.gamma, GC_F32, GC_SHAPE(4), (const double[]){1, 1, 1, 1}, 0, 0, "gamma starts at 1");
    gc_test_expect_values(layer.beta, GC_F32, GC_SHAPE(4), (const double[]){0, 0, 0, 0}, 0, 0, "beta starts at 0");
    const double gamma[4] = {1, 2, 0.5, 1}, beta[4] = {0, 1, 0, -1};
    set_values(layer.gamma, gamma);
    set_values(layer.beta, beta);
    const double x_values[8] = {1, 2, 3, 4, -1, 0, 0, 1};
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 4), x_values);
    double want[8];
    const double mean[2] = {2.5, 0}, variance[2] = {1.25, 0.5};
    for (int i = 0; i < 8; i++)
        want[i] = (x_values[i] - mean[i / 4]) / sqrt(variance[i / 4] + eps) * gamma[i % 4] + beta[i % 4];
    gc_tensor *y = gc_layernorm_layer_forward(&layer, x);
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 4), want, 1e-7, F32_TOLERANCE, "layernorm layer");

    gc_param_list list = {0};
    gc_layernorm_layer_params(&layer, "norm", &list);
    CHECK(list.count == 2);
    CHECK(strcmp(list.items[0].name, "norm.weight") == 0 && list.items[0].tensor == layer.gamma);
    CHECK(strcmp(list.items[1].name, "norm.bias") == 0 && list.items[1].tensor == layer.beta);
    CHECK(list.items[0].no_decay && list.items[1].no_decay);
    gc_param_list_free(&list);
    release_all((gc_tensor *[]){x, y}, 2);
    gc_layernorm_layer_free(&layer);
}

/* relu between two Linears: h = relu([x0, x1, x0 - x1 - 1]), y = [h0 + h1 + h2 + 0.5, 2 h1 - h2]. */
static void test_mlp(void) {
    gc_generator init = {3, 0};
    gc_mlp layer;
    REQUIRE(gc_mlp_init(&layer, 2, 3, GC_ACT_RELU, 0, GC_F32, cpu, &init) == GC_OK);
    CHECK(layer.in.weight->shape[0] == 3 && layer.in.weight->shape[1] == 2);
    CHECK(layer.out.weight->shape[0] == 2 && layer.out.weight->shape[1] == 3);
    set_values(layer.in.weight, (const double[]){1, 0, 0, 1, 1, -1});
    set_values(layer.in.bias, (const double[]){0, 0, -1});
    set_values(layer.out.weight, (const double[]){1, 1, 1, 0, 2, -1});
    set_values(layer.out.bias, (const double[]){0.5, 0});
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 2), (const double[]){2, 1, -1, 3});
    gc_tensor *y = gc_mlp_forward(&layer, x, true); /* dropout 0: training changes nothing */
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 2), (const double[]){3.5, 2, 3.5, 6}, 0, 0, "mlp");

    gc_param_list list = {0};
    gc_mlp_params(&layer, "mlp", &list);
    const char *names[4] = {"mlp.in.weight", "mlp.in.bias", "mlp.out.weight", "mlp.out.bias"};
    CHECK(list.count == 4);
    for (int i = 0; i < 4 && i < list.count; i++)
        CHECK_MSG(strcmp(list.items[i].name, names[i]) == 0, "param %d is %s", i, list.items[i].name);
    gc_param_list_free(&list);
    release_all((gc_tensor *[]){x, y}, 2);
    gc_mlp_free(&layer);
}

/* --- parameter names, shapes, no_decay --- */

static int64_t linear_numel(int64_t in, int64_t out) { return in * out + out; }

static void test_text_encoder_params(void) {
    gc_text_encoder_config config = small_config(false, GC_POOL_CLS, 5, 0);
    config.layers = 1;
    gc_text_encoder encoder;
    init_encoder(&encoder, &config, 4);
    gc_param_list list = {0};
    gc_text_encoder_params(&encoder, "", &list);
    const char *names[] = {
        "embeddings.tokens.weight", "embeddings.positions.weight", "embeddings.norm.weight", "embeddings.norm.bias",
        "layers.0.attention.query.weight", "layers.0.attention.query.bias", "layers.0.attention.key.weight",
        "layers.0.attention.key.bias", "layers.0.attention.value.weight", "layers.0.attention.value.bias",
        "layers.0.attention.output.weight", "layers.0.attention.output.bias", "layers.0.attention_norm.weight",
        "layers.0.attention_norm.bias", "layers.0.mlp.in.weight", "layers.0.mlp.in.bias", "layers.0.mlp.out.weight",
        "layers.0.mlp.out.bias", "layers.0.mlp_norm.weight", "layers.0.mlp_norm.bias", "projection.weight",
        "projection.bias"};
    int count = (int)(sizeof names / sizeof *names);
    CHECK_MSG(list.count == count, "%d params, want %d", list.count, count);
    for (int i = 0; i < count && i < list.count; i++) {
        const gc_param *param = &list.items[i];
        CHECK_MSG(strcmp(param->name, names[i]) == 0, "param %d is %s, want %s", i, param->name, names[i]);
        /* biases and the norms' weights are the ones AdamW must not decay */
        bool norm_or_bias = strstr(param->name, "norm.") || strstr(param->name, ".bias");
        CHECK_MSG(param->no_decay == norm_or_bias, "%s: no_decay %d", param->name, param->no_decay);
        CHECK_MSG(gc_requires_grad(param->tensor) && gc_is_leaf(param->tensor), "%s is not a leaf parameter",
                  param->name);
    }
    const gc_tensor *positions = gc_param_list_find(&list, "embeddings.positions.weight");
    const gc_tensor *mlp_in = gc_param_list_find(&list, "layers.0.mlp.in.weight");
    const gc_tensor *projection = gc_param_list_find(&list, "projection.weight");
    REQUIRE(positions && mlp_in && projection);
    CHECK(positions->shape[0] == 6 && positions->shape[1] == 8);
    CHECK(mlp_in->shape[0] == 12 && mlp_in->shape[1] == 8);
    CHECK(projection->shape[0] == 5 && projection->shape[1] == 8);
    int64_t layer_numel = 4 * linear_numel(8, 8) + 2 * 2 * 8 + linear_numel(8, 12) + linear_numel(12, 8);
    CHECK(gc_param_list_numel(&list) == 11 * 8 + 6 * 8 + 2 * 8 + layer_numel + linear_numel(8, 5));
    CHECK(gc_text_encoder_numel(&config) == gc_param_list_numel(&list)); /* counted without building */
    gc_param_list_free(&list);
    gc_text_encoder_free(&encoder);

    /* pre-norm: no embedding norm, a final norm; a prefix on every name */
    config = small_config(true, GC_POOL_MEAN, 0, 0);
    init_encoder(&encoder, &config, 4);
    gc_text_encoder_params(&encoder, "encoder", &list);
    CHECK(list.count == 2 + 2 * 16 + 2);
    CHECK(strcmp(list.items[0].name, "encoder.embeddings.tokens.weight") == 0);
    CHECK(gc_param_list_find(&list, "encoder.layers.1.mlp.out.bias") != NULL);
    CHECK(gc_param_list_find(&list, "encoder.embeddings.norm.weight") == NULL);
    CHECK(gc_param_list_find(&list, "encoder.projection.weight") == NULL);
    CHECK(strcmp(list.items[list.count - 1].name, "encoder.final_norm.bias") == 0);
    CHECK(gc_text_encoder_numel(&config) == gc_param_list_numel(&list));
    gc_param_list_free(&list);
    gc_text_encoder_free(&encoder);

    /* token types (BERT's segments): their table counts too */
    config.type_vocab = 2;
    init_encoder(&encoder, &config, 5);
    gc_text_encoder_params(&encoder, "encoder", &list);
    CHECK(gc_param_list_find(&list, "encoder.embeddings.token_types.weight") != NULL);
    CHECK(gc_text_encoder_numel(&config) == gc_param_list_numel(&list));
    gc_param_list_free(&list);
    gc_text_encoder_free(&encoder);
}

/* --- initialisation --- */

static void sample_moments(const gc_tensor *t, double *mean, double *std) {
    int64_t n = gc_numel(t);
    double *values = malloc(sizeof(double) * (size_t)n);
    REQUIRE(values);
    gc_to_host_f64(t, values);
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; i++) sum += values[i];
    *mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) squares += (values[i] - *mean) * (values[i] - *mean);
    *std = sqrt(squares / (double)n);
    free(values);
}

static bool bitwise_equal(const gc_tensor *a, const gc_tensor *b) {
    return gc_same_shape(a, b) && a->dtype == b->dtype && memcmp(gc_data(a), gc_data(b), gc_nbytes(a)) == 0;
}

static void test_init(void) {
    /* 65536 draws of normal(0, 0.02): the sample mean's standard error is 0.02 / 256 = 7.8e-5 and
     * the sample std's 0.02 / sqrt(2 * 65536) = 5.5e-5; the bounds are 5 and 7 of them. The draws
     * are fixed by the seed, so the test is deterministic; the bounds say the numbers are right. */
    gc_generator init = {7, 0};
    gc_linear layer;
    REQUIRE(gc_linear_init(&layer, 256, 256, true, GC_F32, cpu, &init) == GC_OK);
    double mean, std;
    sample_moments(layer.weight, &mean, &std);
    CHECK_MSG(fabs(mean) < 4e-4, "weight mean %g", mean);
    CHECK_MSG(fabs(std - 0.02) < 4e-4, "weight std %g", std);
    gc_tensor *zero = gc_zeros(GC_SHAPE(256), GC_F32, cpu);
    CHECK(bitwise_equal(layer.bias, zero));
    CHECK(init.seed == 7 && init.offset == gc_normal_words(256 * 256)); /* the bias draws nothing */

    gc_generator same = {7, 0}, next = init;
    gc_linear twin, successor;
    REQUIRE(gc_linear_init(&twin, 256, 256, true, GC_F32, cpu, &same) == GC_OK);
    REQUIRE(gc_linear_init(&successor, 256, 256, true, GC_F32, cpu, &next) == GC_OK);
    CHECK(bitwise_equal(layer.weight, twin.weight));
    CHECK(!bitwise_equal(layer.weight, successor.weight)); /* the generator moved on */
    gc_tensor_release(zero);
    gc_linear_free(&layer);
    gc_linear_free(&twin);
    gc_linear_free(&successor);

    /* A whole encoder: the generator advances by exactly the draws of its normal parameters
     * (the decayed ones: weights and tables), and one seed gives bitwise the same model. */
    gc_text_encoder_config config = small_config(false, GC_POOL_MEAN, 5, 0);
    gc_text_encoder a, b;
    gc_generator init_a = {9, 3}, init_b = {9, 3};
    REQUIRE(gc_text_encoder_init(&a, &config, cpu, &init_a) == GC_OK);
    REQUIRE(gc_text_encoder_init(&b, &config, cpu, &init_b) == GC_OK);
    gc_param_list list_a = {0}, list_b = {0};
    gc_text_encoder_params(&a, "", &list_a);
    gc_text_encoder_params(&b, "", &list_b);
    uint64_t words = 0;
    for (int i = 0; i < list_a.count; i++) {
        const gc_param *param = &list_a.items[i];
        CHECK_MSG(bitwise_equal(param->tensor, list_b.items[i].tensor), "%s differs between two inits", param->name);
        if (!param->no_decay) words += gc_normal_words(gc_numel(param->tensor));
    }
    CHECK(init_a.offset == 3 + words && init_b.offset == init_a.offset);

    /* Without a generator (a loader's: every weight is read next) the same parameters, of the
     * same shapes, with the weights 0 and the rest as initialised: nothing drawn. */
    gc_text_encoder unfilled;
    REQUIRE(gc_text_encoder_init(&unfilled, &config, cpu, NULL) == GC_OK);
    gc_param_list list_unfilled = {0};
    gc_text_encoder_params(&unfilled, "", &list_unfilled);
    CHECK(list_unfilled.count == list_a.count);
    for (int i = 0; i < list_a.count && i < list_unfilled.count; i++) {
        const gc_param *drawn = &list_a.items[i], *param = &list_unfilled.items[i];
        CHECK_MSG(!strcmp(param->name, drawn->name) && gc_same_shape(param->tensor, drawn->tensor) &&
                      param->no_decay == drawn->no_decay,
                  "%s: not the parameter %s of an encoder with a generator", param->name, drawn->name);
        if (drawn->no_decay) CHECK_MSG(bitwise_equal(param->tensor, drawn->tensor), "%s: not as initialised", param->name);
        else CHECK_MSG(gc_test_largest_abs(param->tensor) == 0, "%s: not 0", param->name);
    }
    gc_param_list_free(&list_unfilled);
    gc_text_encoder_free(&unfilled);
    gc_param_list_free(&list_a);
    gc_param_list_free(&list_b);
    gc_text_encoder_free(&a);
    gc_text_encoder_free(&b);
}

/* --- pooling and l2 normalisation --- */

/* x [2, 3, 2]: sequence 0 has tokens (1, 2), (3, 4), (50, 60); sequence 1 (-1, 1), (2, 0), (4, 2). */
static void test_pooling(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 3, 2), (const double[]){1, 2, 3, 4, 50, 60, -1, 1, 2, 0, 4, 2});
    gc_tensor *mask = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1, 1, 0, 0, 0, 0});
    gc_tensor *cls = gc_pool(x, mask, GC_POOL_CLS);
    gc_tensor *mean = gc_pool(x, mask, GC_POOL_MEAN);
    gc_tensor *unmasked = gc_pool(x, NULL, GC_POOL_MEAN);
    gc_test_expect_values(cls, GC_F32, GC_SHAPE(2, 2), (const double[]){1, 2, -1, 1}, 0, 0, "cls pooling");
    /* the all-padding row pools to 0, not 0 / 0 */
    gc_test_expect_values(mean, GC_F32, GC_SHAPE(2, 2), (const double[]){2, 3, 0, 0}, 0, 0, "masked mean pooling");
    gc_test_expect_values(unmasked, GC_F32, GC_SHAPE(2, 2), (const double[]){18, 22, 5.0 / 3, 1}, 0, F32_TOLERANCE,
                          "mean pooling");
    CHECK(gc_pool(NULL, mask, GC_POOL_MEAN) == NULL);
    release_all((gc_tensor *[]){x, mask, cls, mean, unmasked}, 5);
}

/* (3, 4) -> (0.6, 0.8); 0 stays 0; a vector far shorter than eps is divided by ~eps. */
static void test_l2_normalize(void) {
    const double eps = 1e-6;
    gc_tensor *x = gc_test_tensor(GC_F64, GC_SHAPE(3, 2), (const double[]){3, 4, 0, 0, 1e-9, 0});
    gc_tensor *y = gc_l2_normalize(x, eps);
    /* x / sqrt(||x||^2 + eps^2) is within eps^2 / (2 ||x||^2) = 2e-14 relative of x / ||x|| for
     * (3, 4), and within ||x||^2 / (2 eps^2) = 5e-7 relative of x / eps for (1e-9, 0) */
    gc_test_expect_values(y, GC_F64, GC_SHAPE(3, 2), (const double[]){0.6, 0.8, 0, 0, 1e-3, 0}, 0, 1e-6,
                          "l2_normalize");
    gc_tensor *narrow = gc_test_tensor(GC_F32, GC_SHAPE(1, 4), (const double[]){1, -1, 1, -1});
    gc_tensor *narrow_y = gc_l2_normalize(narrow, eps);
    gc_test_expect_values(narrow_y, GC_F32, GC_SHAPE(1, 4), (const double[]){0.5, -0.5, 0.5, -0.5}, 0, F32_TOLERANCE,
                          "l2_normalize f32");
    release_all((gc_tensor *[]){x, y, narrow, narrow_y}, 4);
}

/* --- attention --- */

/* Deterministic, distinct values for the reference test, into t and into values[numel(t)]
 * for the reference: a smooth function of the index, so that no two entries are equal and no
 * scores tie. */
static void set_smooth(gc_tensor *t, double scale, double phase, double *values) {
    for (int64_t i = 0; i < gc_numel(t); i++) values[i] = scale * sin(phase + 0.7 * (double)i);
    set_values(t, values);
}

/* A direct double-precision attention for one sequence: x [T, D], weights[4] [D, D] and
 * biases[4] [D] (query, key, value, output), mask [T] or NULL -> out [T, D]. */
enum { REF_T = 3, REF_D = 4, REF_HEADS = 2, REF_DH = REF_D / REF_HEADS };
static void reference_attention(const double *x, double weights[4][REF_D * REF_D], double biases[4][REF_D],
                                const double *mask, double *out) {
    double projected[3][REF_T][REF_D], context[REF_T][REF_D];
    for (int p = 0; p < 3; p++)
        for (int t = 0; t < REF_T; t++)
            for (int o = 0; o < REF_D; o++) {
                projected[p][t][o] = biases[p][o];
                for (int i = 0; i < REF_D; i++) projected[p][t][o] += x[t * REF_D + i] * weights[p][o * REF_D + i];
            }
    for (int h = 0; h < REF_HEADS; h++)
        for (int t = 0; t < REF_T; t++) {
            double scores[REF_T], total = 0;
            for (int u = 0; u < REF_T; u++) {
                scores[u] = 0;
                for (int d = h * REF_DH; d < (h + 1) * REF_DH; d++)
                    scores[u] += projected[0][t][d] * projected[1][u][d];
                scores[u] = scores[u] / sqrt(REF_DH) + (mask ? (mask[u] - 1) * 10000 : 0);
                scores[u] = exp(scores[u]);
                total += scores[u];
            }
            for (int d = h * REF_DH; d < (h + 1) * REF_DH; d++) {
                context[t][d] = 0;
                for (int u = 0; u < REF_T; u++) context[t][d] += scores[u] / total * projected[2][u][d];
            }
        }
    for (int t = 0; t < REF_T; t++)
        for (int o = 0; o < REF_D; o++) {
            out[t * REF_D + o] = biases[3][o];
            for (int i = 0; i < REF_D; i++) out[t * REF_D + o] += context[t][i] * weights[3][o * REF_D + i];
        }
}

static void test_attention_reference(void) {
    gc_generator init = {5, 0};
    gc_attention layer;
    REQUIRE(gc_attention_init(&layer, REF_D, REF_HEADS, 0, NULL, GC_F64, cpu, &init) == GC_OK);
    gc_linear *projections[4] = {&layer.query, &layer.key, &layer.value, &layer.output};
    double weights[4][REF_D * REF_D], biases[4][REF_D], x_values[REF_T * REF_D], want[REF_T * REF_D];
    for (int p = 0; p < 4; p++) {
        set_smooth(projections[p]->weight, 0.8, 0.3 + p, weights[p]);
        set_smooth(projections[p]->bias, 0.1, 1.7 * p, biases[p]);
    }
    gc_tensor *x = gc_zeros(GC_SHAPE(1, REF_T, REF_D), GC_F64, cpu);
    REQUIRE(x);
    set_smooth(x, 1.5, 0.5, x_values);
    const double mask_values[REF_T] = {1, 1, 0};
    gc_tensor *mask = gc_test_tensor(GC_F64, GC_SHAPE(1, REF_T), mask_values);

    gc_tensor *y = gc_attention_forward(&layer, x, NULL, false);
    reference_attention(x_values, weights, biases, NULL, want);
    gc_test_expect_values(y, GC_F64, GC_SHAPE(1, REF_T, REF_D), want, F64_TOLERANCE, F64_TOLERANCE,
                          "attention against the reference");
    gc_tensor *masked = gc_attention_forward(&layer, x, mask, false);
    reference_attention(x_values, weights, biases, mask_values, want);
    gc_test_expect_values(masked, GC_F64, GC_SHAPE(1, REF_T, REF_D), want, F64_TOLERANCE, F64_TOLERANCE,
                          "masked attention against the reference");
    release_all((gc_tensor *[]){x, mask, y, masked}, 4);
    gc_attention_free(&layer);
}

/* For B sequences of T tokens with `mask` [B, T]: checks that the rows of `a` and `b`
 * ([B, T, D] or [B, D] when per_token is false) agree bitwise where they belong to real
 * tokens. Padded keys get probability exp(-10000) = 0 exactly in f32, so nothing of a padded
 * token can reach a real one, not even a rounding error. */
static void expect_real_rows_equal(const gc_tensor *a, const gc_tensor *b, const double *mask, int64_t batch,
                                   int64_t length, bool per_token, const char *what) {
    int64_t n = gc_numel(a), rows = per_token ? batch * length : batch, width = n / rows;
    double *va = malloc(sizeof(double) * (size_t)n), *vb = malloc(sizeof(double) * (size_t)n);
    REQUIRE(va && vb && gc_numel(b) == n);
    gc_to_host_f64(a, va);
    gc_to_host_f64(b, vb);
    int bad = 0;
    for (int64_t row = 0; row < rows; row++)
        if (!per_token || mask[row] == 1)
            bad += memcmp(va + row * width, vb + row * width, sizeof(double) * (size_t)width) != 0;
    CHECK_MSG(bad == 0, "%s: %d rows of real tokens changed with the padding", what, bad);
    free(va);
    free(vb);
}

static void test_attention_masks(void) {
    gc_generator init = {6, 0};
    gc_attention layer;
    REQUIRE(gc_attention_init(&layer, 8, 2, 0, NULL, GC_F32, cpu, &init) == GC_OK);
    gc_tensor *x = gc_test_random(GC_SHAPE(2, 4, 8), GC_F32, 60);
    gc_tensor *ones = gc_ones(GC_SHAPE(2, 4), GC_F32, cpu);
    gc_tensor *unmasked = gc_attention_forward(&layer, x, NULL, false);
    gc_tensor *all_kept = gc_attention_forward(&layer, x, ones, false);
    /* (1 - 1) * 10000 adds exactly 0 to every score */
    gc_test_expect_close(unmasked, all_kept, 0, 0, "attention with an all-ones mask");

    /* new values at the padded positions of x change nothing at the real ones */
    const double mask_values[8] = {1, 1, 1, 0, 1, 1, 0, 0};
    gc_tensor *mask = gc_test_tensor(GC_F32, GC_SHAPE(2, 4), mask_values);
    gc_tensor *other = gc_test_random(GC_SHAPE(2, 4, 8), GC_F32, 61);
    gc_tensor *keep = gc_reshape(mask, GC_SHAPE(2, 4, 1));
    gc_tensor *drop = gc_rsub_scalar(keep, 1);
    gc_tensor *kept_x = gc_mul(x, keep), *new_padding = gc_mul(other, drop);
    gc_tensor *repadded = gc_add(kept_x, new_padding);
    gc_tensor *y = gc_attention_forward(&layer, x, mask, false);
    gc_tensor *y_repadded = gc_attention_forward(&layer, repadded, mask, false);
    expect_real_rows_equal(y, y_repadded, mask_values, 2, 4, true, "attention");
    release_all((gc_tensor *[]){x, ones, unmasked, all_kept, mask, other, keep, drop, kept_x, new_padding, repadded, y,
                                y_repadded},
                13);
    gc_attention_free(&layer);
}

/* --- the encoder layer --- */

static void test_encoder_layer(void) {
    gc_tensor *x = gc_test_random(GC_SHAPE(2, 3, 8), GC_F32, 70);
    gc_tensor *mask = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1, 1, 1, 1, 1, 0});
    for (int pre_norm = 0; pre_norm < 2; pre_norm++) {
        gc_generator init = {8, 0};
        gc_encoder_layer layer;
        gc_text_encoder_config config = {.dim = 8, .heads = 2, .hidden = 12, .activation = GC_ACT_GELU_TANH,
                                         .pre_norm = pre_norm, .dtype = GC_F32};
        REQUIRE(gc_encoder_layer_init(&layer, &config, cpu, &init) == GC_OK);
        gc_tensor *y = gc_encoder_layer_forward(&layer, x, mask, false);
        REQUIRE(y);
        CHECK(y->ndim == 3 && gc_same_shape(x, y));
        gc_param_list list = {0};
        gc_encoder_layer_params(&layer, "layer", &list);
        CHECK(list.count == 16);
        CHECK(gc_param_list_find(&list, "layer.attention_norm.weight") == layer.attention_norm.gamma);
        CHECK(gc_param_list_find(&list, "layer.mlp.out.bias") == layer.mlp.out.bias);
        gc_param_list_free(&list);

        /* With both sublayers' last Linear zeroed, each residual adds exactly 0: pre-norm gives x
         * back, post-norm gives norm(norm(x)) (gamma 1, beta 0, BERT's eps 1e-12). */
        set_constant(layer.attention.output.weight, 0);
        set_constant(layer.mlp.out.weight, 0);
        gc_tensor *identity = gc_encoder_layer_forward(&layer, x, mask, false);
        gc_tensor *once = gc_layernorm(x, NULL, NULL, 1e-12, NULL, NULL);
        gc_tensor *twice = gc_layernorm(once, NULL, NULL, 1e-12, NULL, NULL);
        gc_test_expect_close(pre_norm ? x : twice, identity, 0, 0,
                             pre_norm ? "pre-norm layer with zero sublayers" : "post-norm layer with zero sublayers");
        release_all((gc_tensor *[]){y, identity, once, twice}, 4);
        gc_encoder_layer_free(&layer);
    }
    release_all((gc_tensor *[]){x, mask}, 2);
}

/* --- the text encoder --- */

static void test_text_encoder_shapes(void) {
    gc_tensor *ids = ids_tensor(3, 4, (const int32_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1});
    gc_tensor *mask = gc_test_tensor(GC_F32, GC_SHAPE(3, 4), (const double[]){1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0});
    for (int variant = 0; variant < 8; variant++) {
        bool pre_norm = variant & 1;
        gc_pooling pooling = variant & 2 ? GC_POOL_MEAN : GC_POOL_CLS;
        int64_t projection = variant & 4 ? 5 : 0;
        gc_text_encoder_config config = small_config(pre_norm, pooling, projection, 0);
        gc_text_encoder encoder;
        init_encoder(&encoder, &config, 10);
        gc_tensor *y = gc_text_encoder_forward(&encoder, ids, mask, false);
        gc_tensor *unmasked = gc_text_encoder_forward(&encoder, ids, NULL, false);
        int64_t width = projection ? projection : 8;
        REQUIRE(y && unmasked);
        CHECK_MSG(y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == width && gc_same_shape(y, unmasked),
                  "variant %d: wrong output shape", variant);
        CHECK(gc_requires_grad(y));
        release_all((gc_tensor *[]){y, unmasked}, 2);
        gc_text_encoder_free(&encoder);
    }
    release_all((gc_tensor *[]){ids, mask}, 2);
}

/* Other ids at padded positions change no pooled vector: padding reaches a real token only
 * through attention, where its probability is exactly 0. */
static void test_text_encoder_padding(void) {
    const double mask_values[10] = {1, 1, 1, 0, 0, 1, 1, 1, 1, 1};
    gc_tensor *mask = gc_test_tensor(GC_F32, GC_SHAPE(2, 5), mask_values);
    gc_tensor *ids = ids_tensor(2, 5, (const int32_t[]){1, 2, 3, 0, 0, 4, 5, 6, 7, 8});
    gc_tensor *other_ids = ids_tensor(2, 5, (const int32_t[]){1, 2, 3, 9, 10, 4, 5, 6, 7, 8});
    for (int variant = 0; variant < 4; variant++) {
        gc_text_encoder_config config = small_config(variant & 1, variant & 2 ? GC_POOL_MEAN : GC_POOL_CLS, 0, 0);
        gc_text_encoder encoder;
        init_encoder(&encoder, &config, 11);
        gc_tensor *y = gc_text_encoder_forward(&encoder, ids, mask, false);
        gc_tensor *y_other = gc_text_encoder_forward(&encoder, other_ids, mask, false);
        REQUIRE(y && y_other);
        expect_real_rows_equal(y, y_other, mask_values, 2, 5, false, "text encoder");
        release_all((gc_tensor *[]){y, y_other}, 2);
        gc_text_encoder_free(&encoder);
    }
    release_all((gc_tensor *[]){mask, ids, other_ids}, 3);
}

/* Dropout draws from the CPU's default generator: training outputs differ from eval and
 * from each other, and repeat bitwise after re-seeding; eval is deterministic. */
static void test_dropout(void) {
    gc_text_encoder_config config = small_config(false, GC_POOL_MEAN, 0, 0.1);
    gc_text_encoder encoder;
    init_encoder(&encoder, &config, 12);
    /* as BERT: dropout on the attention probabilities and each block's output, none inside the MLP */
    CHECK(encoder.layers[1].dropout == 0.1 && encoder.layers[1].attention.dropout == 0.1);
    CHECK(encoder.layers[1].mlp.dropout == 0);
    gc_tensor *ids = ids_tensor(2, 3, (const int32_t[]){1, 2, 3, 4, 5, 6});
    gc_tensor *eval = gc_text_encoder_forward(&encoder, ids, NULL, false);
    gc_tensor *eval_again = gc_text_encoder_forward(&encoder, ids, NULL, false);
    gc_manual_seed(33);
    gc_tensor *train = gc_text_encoder_forward(&encoder, ids, NULL, true);
    gc_tensor *train_next = gc_text_encoder_forward(&encoder, ids, NULL, true);
    gc_manual_seed(33);
    gc_tensor *train_replayed = gc_text_encoder_forward(&encoder, ids, NULL, true);
    REQUIRE(eval && eval_again && train && train_next && train_replayed);
    CHECK(bitwise_equal(eval, eval_again));
    CHECK(!bitwise_equal(eval, train));
    CHECK(!bitwise_equal(train, train_next));
    CHECK(bitwise_equal(train, train_replayed));
    release_all((gc_tensor *[]){ids, eval, eval_again, train, train_next, train_replayed}, 6);
    gc_text_encoder_free(&encoder);
}

/* --- running out of memory: init and forward fail cleanly --- */

/* The limit is set just below what the allocation number `count` (counting from 0) needs, for
 * every parameter in turn: init fails there, reports it, and leaves nothing allocated. */
static void test_init_out_of_memory(void) {
    gc_text_encoder_config config = small_config(true, GC_POOL_CLS, 5, 0);
    gc_text_encoder encoder;
    init_encoder(&encoder, &config, 13);
    gc_param_list list = {0};
    gc_text_encoder_params(&encoder, "", &list);
    gc_text_encoder_free(&encoder); /* the list keeps the tensors alive, for their sizes */
    size_t start = live_bytes(), before = 0;
    for (int failing = 0; failing < list.count; failing++) {
        /* one byte of slack: the failing parameter (4 bytes or more) still does not fit */
        gc_memory_set_limit(cpu, start + before + 1);
        gc_generator init = {13, 0};
        gc_status status = gc_text_encoder_init(&encoder, &config, cpu, &init);
        CHECK_MSG(status == GC_ERR_MEM_LIMIT, "failing at %s: status %s", list.items[failing].name,
                  gc_status_name(status));
        CHECK_MSG(live_bytes() == start, "failing at %s: %zu bytes left behind", list.items[failing].name,
                  live_bytes() - start);
        if (status == GC_OK) gc_text_encoder_free(&encoder);
        before += gc_nbytes(list.items[failing].tensor);
    }
    gc_memory_set_limit(cpu, 0);
    gc_clear_error();
    gc_param_list_free(&list);
}

/* A forward (recording a graph) under limits from nothing to its peak: where it fails it
 * returns NULL and frees every intermediate. */
static void test_forward_out_of_memory(void) {
    gc_text_encoder_config config = small_config(false, GC_POOL_MEAN, 5, 0.1);
    gc_text_encoder encoder;
    init_encoder(&encoder, &config, 14);
    gc_tensor *ids = ids_tensor(2, 3, (const int32_t[]){1, 2, 3, 4, 5, 6});
    gc_tensor *mask = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1, 1, 0, 1, 1, 1});
    size_t start = live_bytes();
    gc_memory_reset_peak(cpu);
    gc_tensor *y = gc_text_encoder_forward(&encoder, ids, mask, true);
    REQUIRE(y);
    size_t needed = gc_memory_get_stats(cpu).peak_bytes - start;
    gc_tensor_release(y);
    int failures = 0;
    for (int step = 0; step < 64; step++) {
        gc_memory_set_limit(cpu, start + 1 + needed * (size_t)step / 64);
        y = gc_text_encoder_forward(&encoder, ids, mask, true);
        failures += y == NULL;
        CHECK_MSG(y != NULL || gc_last_status() == GC_ERR_MEM_LIMIT, "forward failed with %s", gc_last_error());
        gc_tensor_release(y);
        CHECK_MSG(live_bytes() == start, "limit %d/64: %zu bytes left behind", step, live_bytes() - start);
    }
    CHECK(failures > 32); /* most limits are too low: the failures were exercised */
    gc_memory_set_limit(cpu, 0);
    gc_clear_error();
    release_all((gc_tensor *[]){ids, mask}, 2);
    gc_text_encoder_free(&encoder);
}

/* --- programmer errors --- */

static gc_text_encoder fatal_encoder; /* for the children of gc_test_expect_fatal */

static void too_long(void *unused) {
    (void)unused;
    gc_tensor *ids = gc_zeros(GC_SHAPE(1, 7), GC_I32, cpu);
    gc_text_encoder_forward(&fatal_encoder, ids, NULL, false);
}

static void float_ids(void *unused) {
    (void)unused;
    gc_tensor *ids = gc_zeros(GC_SHAPE(1, 3), GC_F32, cpu);
    gc_text_encoder_forward(&fatal_encoder, ids, NULL, false);
}

static void f64_mask(void *unused) {
    (void)unused;
    gc_tensor *ids = gc_zeros(GC_SHAPE(1, 3), GC_I32, cpu), *mask = gc_ones(GC_SHAPE(1, 3), GC_F64, cpu);
    gc_text_encoder_forward(&fatal_encoder, ids, mask, false);
}

static void linear_wrong_width(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 7), GC_F32, cpu);
    gc_linear_forward(&fatal_encoder.projection, x);
}

static void attention_wrong_mask(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 3, 8), GC_F32, cpu), *mask = gc_ones(GC_SHAPE(2, 4), GC_F32, cpu);
    gc_attention_forward(&fatal_encoder.layers[0].attention, x, mask, false);
}

static void pool_two_dims(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 8), GC_F32, cpu);
    gc_pool(x, NULL, GC_POOL_CLS);
}

static void heads_not_dividing(void *unused) {
    (void)unused;
    gc_generator init = {0, 0};
    gc_attention layer;
    gc_attention_init(&layer, 10, 3, 0, NULL, GC_F32, cpu, &init);
}

static void dropout_one(void *unused) {
    (void)unused;
    gc_generator init = {0, 0};
    gc_mlp layer;
    gc_mlp_init(&layer, 4, 8, GC_ACT_RELU, 1, GC_F32, cpu, &init);
}

static void integer_linear(void *unused) {
    (void)unused;
    gc_generator init = {0, 0};
    gc_linear layer;
    gc_linear_init(&layer, 4, 8, true, GC_I32, cpu, &init);
}

static void test_fatal(void) {
    gc_text_encoder_config config = small_config(false, GC_POOL_CLS, 5, 0);
    init_encoder(&fatal_encoder, &config, 15);
    gc_test_expect_fatal(too_long, NULL, "text_encoder: ids [1, 7] i32 cpu have 7 tokens, outside [1, max_length 6]");
    gc_test_expect_fatal(float_ids, NULL, "text_encoder: ids [1, 3] f32 cpu are not i32 [B, T]");
    gc_test_expect_fatal(f64_mask, NULL, "text_encoder: mask [1, 3] f64 cpu is not [1, 3] f32 cpu");
    gc_test_expect_fatal(linear_wrong_width, NULL, "linear: x [2, 7] f32 cpu does not end in the 8 inputs");
    gc_test_expect_fatal(attention_wrong_mask, NULL, "attention: mask [2, 4] f32 cpu is not [2, 3] f32 cpu");
    gc_test_expect_fatal(pool_two_dims, NULL, "pool: x [2, 8] f32 cpu is not [B, T, D]");
    gc_test_expect_fatal(heads_not_dividing, NULL, "attention: dim 10 does not split into 3 heads");
    gc_test_expect_fatal(dropout_one, NULL, "mlp: dropout 1 is outside [0, 1)");
    gc_test_expect_fatal(integer_linear, NULL, "linear: needs positive sizes and a floating dtype, got 4, 8 and i32");
    gc_text_encoder_free(&fatal_encoder);
}

int main(void) {
    size_t start = live_bytes();
    test_activations();
    test_linear();
    test_embedding();
    test_layernorm();
    test_mlp();
    test_text_encoder_params();
    test_init();
    test_pooling();
    test_l2_normalize();
    test_attention_reference();
    test_attention_masks();
    test_encoder_layer();
    test_text_encoder_shapes();
    test_text_encoder_padding();
    test_dropout();
    test_init_out_of_memory();
    test_forward_out_of_memory();
    test_fatal();
    CHECK_MSG(live_bytes() == start, "%zu bytes still live at the end", live_bytes() - start);
    return gc_test_result();
}
