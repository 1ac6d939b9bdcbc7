/* Decoder-family models against transformers (tests/make_decoder_fixture.py): the tiny
 * Qwen2, Qwen3, Llama and Mistral folders (tied and untied embeddings, a "model." prefix and
 * bare names, Qwen2's q/k/v biases, Qwen3's q/k norms and head_dim, linear rope scaling, two
 * shards, Mistral's sliding window of 4 over texts of up to 19 tokens) loaded through the
 * library, their last hidden states and last-token embeddings compared with transformers' in
 * f32 and with the plain-PyTorch decoder's in f64, attention composed and fused.
 *
 * The f32 bound. Two f32 computations of one function differ by at most the sum of their
 * distances to the exact one. Along the longest chain of roundings that feeds an output
 * element, each rounding adds at most u = 2^-24 relative to the value it rounds; a sum of K
 * terms rounds K times. The chain of one layer is: the RMSNorm's sum of squares (dim), the
 * q/k/v projection (dim), the scores (head_dim), the softmax's sum (T) and the context (T),
 * the output projection (heads x head_dim), the second RMSNorm (dim), gate and up (dim), and
 * down (intermediate); then the final norm (dim). The values along the chain are at most M
 * (the largest |h| of the reference: the residual stream dominates), so each implementation
 * is within N u M of the exact value and the two within 2 N u M; the network's gain between
 * a rounding and the output (weights of std 0.3 over 32 inputs: about 1.7 per product) is
 * allowed for by a factor of 4. f64 against the plain decoder: the same with u = 2^-53. */
#include <math.h>

#include "fixture.h"
#include "values.h"

/* The texts make_decoder_fixture.py encoded (texts for the first three, MISTRAL_TEXTS). */
static const char *const texts[] = {"Hello world", "the cat sat, naïve café", "東京 123 😀!", "a",
                                    "Instruct: find it\nQuery:what?"};
static const char *const mistral_texts[] = {"the cat sat on the mat", "a", "retrieval embedding gradient cache",
                                            "Hello world, 123 café", "the gradient of the cache"};
#define TEXT_COUNT 5

typedef struct model_case {
    const char *name;    /* decoder_<name>_v1.bin, tiny_<name>/ */
    int64_t head_dim, kv_heads, window;
    double rope_scale;
    bool qk_norm, qkv_bias, normalize;
    const char *const *texts; /* [TEXT_COUNT] */
    const char *prompt;       /* how the last text starts: the prompt of check_folder's prompted encoding */
} model_case;

static const model_case cases[] = {
    {"qwen2", 8, 2, 0, 0, false, true, false, texts, "Instruct: find it\nQuery:"},
    {"qwen3", 16, 2, 0, 0, true, false, true, texts, "Instruct: find it\nQuery:"},
    {"llama", 8, 2, 0, 2, false, false, false, texts, "Instruct: find it\nQuery:"},
    {"mistral", 8, 2, 4, 0, false, false, false, mistral_texts, "the gradient of the "},
};

/* N of the bound above for a configuration and a length. */
static double chain_roundings(const gc_text_encoder_config *c, int64_t length) {
    double layer = 2.0 * c->dim + (double)c->attention.head_dim + 2.0 * (double)length +
                   (double)(c->heads * c->attention.head_dim) + 2.0 * c->dim + (double)c->hidden;
    return c->layers * layer + (double)c->dim;
}

static void check_config(const model_case *m, const gc_text_encoder_config *c) {
    CHECK_MSG(c->pre_norm && c->rms_norm && c->gated_mlp && c->pooling == GC_POOL_LAST && c->attention.causal &&
                  c->attention.head_dim == m->head_dim && c->attention.kv_heads == m->kv_heads &&
                  c->attention.rope_scale == m->rope_scale && (c->attention.qk_norm_eps > 0) == m->qk_norm &&
                  c->attention.no_qkv_bias == !m->qkv_bias && c->attention.no_output_bias && c->no_mlp_bias &&
                  c->normalize == m->normalize && c->layernorm_eps == 1e-6 && c->layers == 2 &&
                  c->attention.window == m->window && c->max_length == 64,
              "%s: the configuration read is not the fixture's", m->name);
}

/* The hidden states of the fixture's ids in `dtype` against `want` [B, T, D] on the tokens
 * the mask keeps (padding's vectors are anyone's), and the embeddings against `pooled`. */
static void check_model(const model_case *m, gc_dtype dtype, const gc_param_list *fixture) {
    char folder[512], what[128];
    const char *path = gc_fused_attention() ? "fused" : "composed";
    snprintf(folder, sizeof folder, "%s/tiny_%s", GC_TEST_FIXTURES, m->name);
    gc_text_encoder_config config;
    gc_status read = gc_pretrained_read_config(folder, &config);
    if (read != GC_OK) fprintf(stderr, "%s\n", gc_last_error());
    REQUIRE(read == GC_OK);
    check_config(m, &config);
    config.dtype = dtype;
    gc_generator init = {1, 0};
    gc_text_encoder encoder;
    gc_bert_unused unused;
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    gc_status loaded = gc_pretrained_load_weights(folder, &encoder, &unused);
    if (loaded != GC_OK) fprintf(stderr, "%s\n", gc_last_error());
    REQUIRE(loaded == GC_OK);
    /* the untied Llama's lm_head is outside the encoder, kept to be saved back */
    bool head = !strcmp(m->name, "llama");
    CHECK_MSG(unused.count == head && unused.kept.count == head, "%s: %d unused: %s", m->name, unused.count,
              unused.names);
    gc_tensor *ids = gc_fixture_get(fixture, "ids"), *mask32 = gc_fixture_get(fixture, "mask");
    gc_tensor *mask = gc_cast(mask32, dtype);
    gc_tensor *want = gc_fixture_get(fixture, dtype == GC_F64 ? "hidden_f64" : "hidden_f32");
    gc_tensor *pooled_want = gc_fixture_get(fixture, dtype == GC_F64 ? "last_f64" : "last_f32_left");
    gc_tensor *hidden = gc_text_encoder_hidden(&encoder, ids, mask, false);
    gc_tensor *pooled = gc_text_encoder_forward(&encoder, ids, mask, false);
    REQUIRE(hidden && pooled);
    double u = dtype == GC_F64 ? 0x1p-53 : 0x1p-24, big = gc_test_largest_abs(want);
    double atol = 4 * 2 * chain_roundings(&config, ids->shape[1]) * u * big;
    /* padding's rows compared as 0 on both sides: the mask times each */
    gc_tensor *column = gc_reshape(mask, GC_SHAPE(mask->shape[0], mask->shape[1], 1));
    gc_tensor *kept = gc_mul(hidden, column), *want_cast = gc_cast(want, dtype), *want_kept = gc_mul(want_cast, column);
    snprintf(what, sizeof what, "%s %s %s hidden states (bound %.3g)", m->name, path, gc_dtype_name(dtype), atol);
    gc_test_expect_close(want_kept, kept, atol, 0, what);
    gc_tensor *pooled_ref = config.normalize ? gc_l2_normalize(pooled_want, 1e-12) : gc_tensor_retain(pooled_want);
    snprintf(what, sizeof what, "%s %s %s last-token embeddings (transformers: left padding)", m->name, path,
             gc_dtype_name(dtype));
    gc_test_expect_close(pooled_ref, pooled, config.normalize ? atol / big : atol, 0, what);
    RELEASE(mask, hidden, pooled, column, kept, want_cast, want_kept, pooled_ref);
    gc_bert_unused_free(&unused);
    gc_text_encoder_free(&encoder);
}

/* The whole folder through the public API: gc_pretrained_load's BPE tokenizer and encoder give
 * transformers' embeddings from the texts themselves; the prompted encoding of the last text's
 * end is the last text's. */
static void check_folder(const model_case *m, const gc_param_list *fixture) {
    char folder[512];
    snprintf(folder, sizeof folder, "%s/tiny_%s", GC_TEST_FIXTURES, m->name);
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_status status = gc_pretrained_load(folder, gc_cpu(), &encoder, &tokenizer, NULL);
    if (status != GC_OK) fprintf(stderr, "%s\n", gc_last_error());
    REQUIRE(status == GC_OK);
    gc_tensor *got = gc_encode_texts(&encoder, tokenizer, m->texts, TEXT_COUNT, 64, 2);
    gc_tensor *last = gc_fixture_get(fixture, "last_f32_left");
    gc_tensor *want = encoder.config.normalize ? gc_l2_normalize(last, 1e-12) : gc_tensor_retain(last);
    /* the bound of check_model for the f32 forward (the texts are shorter than 64 tokens) */
    double atol = 4 * 2 * chain_roundings(&encoder.config, 64) * 0x1p-24 * gc_test_largest_abs(last);
    gc_test_expect_close(want, got, encoder.config.normalize ? atol / gc_test_largest_abs(last) : atol, 0, m->name);
    const char *question[] = {m->texts[TEXT_COUNT - 1] + strlen(m->prompt)};
    gc_tensor *prompted = gc_encode_texts_prompted(&encoder, tokenizer, m->prompt, question, 1, 64, 1);
    gc_tensor *plain = gc_slice0(got, TEXT_COUNT - 1, TEXT_COUNT);
    gc_test_expect_close(plain, prompted, 0, 0, "prompted query");
    RELEASE(got, want, prompted, plain);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&encoder);
}

static void test_prompt(void) {
    char folder[512], *prompt, *none;
    snprintf(folder, sizeof folder, "%s/tiny_qwen3", GC_TEST_FIXTURES);
    REQUIRE(gc_pretrained_prompt(folder, "query", &prompt) == GC_OK && gc_pretrained_prompt(folder, "x", &none) == GC_OK);
    CHECK(prompt && !strcmp(prompt, "Instruct: Given a question, find its answer\nQuery:") && !none);
    free(prompt);
}

static void test_models(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/decoder_%s_v1.bin", GC_TEST_FIXTURES, cases[i].name);
        gc_param_list fixture = gc_fixture_load(path);
        for (int fused = 0; fused < 2; fused++) { /* the composed ops' bias, then the fused op's own mask */
            gc_set_fused_attention(fused);
            check_model(&cases[i], GC_F32, &fixture);
            check_model(&cases[i], GC_F64, &fixture);
        }
        gc_set_fused_attention(false);
        check_folder(&cases[i], &fixture);
        gc_param_list_free(&fixture);
    }
}

int main(void) {
    size_t start = gc_memory_get_stats(gc_cpu()).live_bytes;
    GC_TEST_CASE(test_models);
    GC_TEST_CASE(test_prompt);
    CHECK_MSG(gc_memory_get_stats(gc_cpu()).live_bytes == start, "tensors left alive");
    return gc_test_result();
}
