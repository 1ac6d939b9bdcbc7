/* The decoder family's layer choices by what they must do (the values against transformers
 * are test_decoder_parity's, the gradients test_layer_gradcheck's):
 *  - grouped-query attention is multi-head attention whose key/value heads are repeated;
 *  - causal attention: no position sees a later token;
 *  - last-token pooling finds the last real token with the padding on either side, and a
 *    rotary decoder embeds a text the same whichever side it was padded on;
 *  - the parameter count of a configuration is what init creates. */
#include "values.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

/* 2 key/value heads against 4 whose key and value weights repeat each of those heads twice
 * (query head h uses key head h / 2): the same outputs. */
static void test_grouped_query(void) {
    gc_attention_options grouped = {.kv_heads = 2, .head_dim = 4, .causal = true, .rope_theta = 50},
                         full = {.head_dim = 4, .causal = true, .rope_theta = 50};
    gc_attention a, b;
    gc_generator init_a = {1, 0}, init_b = {2, 0};
    REQUIRE(gc_attention_init(&a, 8, 4, 0, &grouped, GC_F64, cpu, &init_a) == GC_OK);
    REQUIRE(gc_attention_init(&b, 8, 4, 0, &full, GC_F64, cpu, &init_b) == GC_OK);
    gc_linear *from[4] = {&a.query, &a.key, &a.value, &a.output}, *to[4] = {&b.query, &b.key, &b.value, &b.output};
    for (int p = 0; p < 4; p++) {
        bool repeat = p == 1 || p == 2; /* key and value: rows of head h / 2 for head h */
        for (int head = 0; head < 4 && repeat; head++) {
            gc_tensor *src = gc_slice0(from[p]->weight, (head / 2) * 4, (head / 2) * 4 + 4);
            gc_tensor *dst = gc_slice0(to[p]->weight, head * 4, head * 4 + 4);
            gc_tensor *src_bias = gc_slice0(from[p]->bias, (head / 2) * 4, (head / 2) * 4 + 4);
            gc_tensor *dst_bias = gc_slice0(to[p]->bias, head * 4, head * 4 + 4);
            REQUIRE(gc_copy_(dst, src) == GC_OK && gc_copy_(dst_bias, src_bias) == GC_OK);
            RELEASE(src, dst, src_bias, dst_bias);
        }
        if (!repeat) REQUIRE(gc_copy_(to[p]->weight, from[p]->weight) == GC_OK && gc_copy_(to[p]->bias, from[p]->bias) == GC_OK);
    }
    gc_tensor *x = gc_test_random(GC_SHAPE(2, 5, 8), GC_F64, 3);
    gc_tensor *mask = gc_test_tensor(GC_F64, GC_SHAPE(2, 5), (const double[]){1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
    gc_tensor *ya = gc_attention_forward(&a, x, mask, false), *yb = gc_attention_forward(&b, x, mask, false);
    gc_test_expect_close(yb, ya, 1e-14, 1e-12, "grouped-query attention against repeated heads");
    RELEASE(x, mask, ya, yb);
    gc_attention_free(&a);
    gc_attention_free(&b);
}

static gc_text_encoder_config decoder_config(gc_pooling pooling) {
    return (gc_text_encoder_config){.vocab = 11, .max_length = 8, .dim = 8, .heads = 4, .layers = 2, .hidden = 12,
                                    .pre_norm = true, .pooling = pooling, .layernorm_eps = 1e-6, .dtype = GC_F64,
                                    .rms_norm = true, .gated_mlp = true, .no_mlp_bias = true,
                                    .attention = {.kv_heads = 2, .causal = true, .rope_theta = 10000,
                                                  .qk_norm_eps = 1e-6, .no_qkv_bias = true, .no_output_bias = true}};
}

/* Token 2 changed: the hidden states of positions 0 and 1 stay bitwise the same. */
static void test_causal(void) {
    gc_text_encoder_config config = decoder_config(GC_POOL_LAST);
    config.layers = 1;
    gc_generator init = {4, 0};
    gc_encoder_layer layer;
    REQUIRE(gc_encoder_layer_init(&layer, &config, cpu, &init) == GC_OK);
    gc_tensor *x = gc_test_random(GC_SHAPE(1, 4, 8), GC_F64, 5), *changed = gc_clone(x);
    gc_tensor *rows = gc_reshape(changed, GC_SHAPE(4, 8)), *third = gc_slice0(rows, 2, 3);
    gc_fill_(third, 7);
    gc_tensor *y = gc_encoder_layer_forward(&layer, x, NULL, false);
    gc_tensor *y_changed = gc_encoder_layer_forward(&layer, changed, NULL, false);
    double got[32], want[32];
    gc_to_host_f64(y, want);
    gc_to_host_f64(y_changed, got);
    bool same = true, later_moved = false;
    for (int i = 0; i < 32; i++) {
        if (i < 16) same = same && got[i] == want[i];
        else later_moved = later_moved || got[i] != want[i];
    }
    CHECK_MSG(same, "causal: a later token changed an earlier position's output");
    CHECK_MSG(later_moved, "causal: the changed token's own output did not move");
    RELEASE(x, changed, rows, third, y, y_changed);
    gc_encoder_layer_free(&layer);
}

/* x [2, 3, 2] by hand: right padding picks the token before the padding, left padding the
 * last position, no mask the last position. */
static void test_last_pooling_values(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 3, 2), (const double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    gc_tensor *right = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1, 1, 0, 1, 0, 0});
    gc_tensor *left = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){0, 1, 1, 0, 0, 1});
    gc_tensor *a = gc_pool(x, right, GC_POOL_LAST), *b = gc_pool(x, left, GC_POOL_LAST), *c = gc_pool(x, NULL, GC_POOL_LAST);
    gc_test_expect_values(a, GC_F32, GC_SHAPE(2, 2), (const double[]){3, 4, 7, 8}, 0, 0, "last token, right padding");
    gc_test_expect_values(b, GC_F32, GC_SHAPE(2, 2), (const double[]){5, 6, 11, 12}, 0, 0, "last token, left padding");
    gc_test_expect_values(c, GC_F32, GC_SHAPE(2, 2), (const double[]){5, 6, 11, 12}, 0, 0, "last token, no mask");
    RELEASE(x, right, left, a, b, c);
}

/* Two texts of 3 and 5 tokens, padded right and then left to 5: rotary positions make the
 * attention depend on distances only, so the embeddings agree to rounding although the
 * left-padded tokens sit at other positions (transformers pads decoders' embeddings left). */
static void test_padding_sides(void) {
    gc_text_encoder_config config = decoder_config(GC_POOL_LAST);
    gc_generator init = {6, 0};
    gc_text_encoder encoder;
    REQUIRE(gc_text_encoder_init(&encoder, &config, cpu, &init) == GC_OK);
    gc_tensor *right_ids = gc_from_host((const int32_t[]){3, 4, 5, 0, 0, 1, 2, 3, 4, 5}, GC_SHAPE(2, 5), GC_I32, cpu);
    gc_tensor *left_ids = gc_from_host((const int32_t[]){0, 0, 3, 4, 5, 1, 2, 3, 4, 5}, GC_SHAPE(2, 5), GC_I32, cpu);
    gc_tensor *right = gc_test_tensor(GC_F64, GC_SHAPE(2, 5), (const double[]){1, 1, 1, 0, 0, 1, 1, 1, 1, 1});
    gc_tensor *left = gc_test_tensor(GC_F64, GC_SHAPE(2, 5), (const double[]){0, 0, 1, 1, 1, 1, 1, 1, 1, 1});
    gc_tensor *a = gc_text_encoder_forward(&encoder, right_ids, right, false);
    gc_tensor *b = gc_text_encoder_forward(&encoder, left_ids, left, false);
    REQUIRE(a && b);
    gc_test_expect_close(a, b, 1e-13, 1e-12, "right against left padding");
    RELEASE(right_ids, left_ids, right, left, a, b);
    gc_text_encoder_free(&encoder);
}

static void test_numel(void) {
    gc_text_encoder_config configs[3] = {decoder_config(GC_POOL_LAST), decoder_config(GC_POOL_MEAN),
                                         decoder_config(GC_POOL_LAST)};
    configs[1].attention = (gc_attention_options){.kv_heads = 1, .head_dim = 6, .rope_theta = 1e6};
    configs[1].no_mlp_bias = false;
    configs[2].rms_norm = configs[2].gated_mlp = false; /* LayerNorm, plain MLP, rotary */
    for (int i = 0; i < 3; i++) {
        gc_generator init = {7, 0};
        gc_text_encoder encoder;
        REQUIRE(gc_text_encoder_init(&encoder, &configs[i], cpu, &init) == GC_OK);
        gc_param_list params = {0};
        gc_text_encoder_params(&encoder, "", &params);
        CHECK_MSG(gc_text_encoder_numel(&configs[i]) == gc_param_list_numel(&params),
                  "config %d: numel %lld, parameters %lld", i, (long long)gc_text_encoder_numel(&configs[i]),
                  (long long)gc_param_list_numel(&params));
        gc_param_list_free(&params);
        gc_text_encoder_free(&encoder);
    }
}

int main(void) {
    size_t start = gc_memory_get_stats(cpu).live_bytes;
    GC_TEST_CASE(test_grouped_query);
    GC_TEST_CASE(test_causal);
    GC_TEST_CASE(test_last_pooling_values);
    GC_TEST_CASE(test_padding_sides);
    GC_TEST_CASE(test_numel);
    CHECK_MSG(gc_memory_get_stats(cpu).live_bytes == start, "tensors left alive");
    return gc_test_result();
}
