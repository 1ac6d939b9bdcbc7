/* Attention over packed tokens (gc_attention_packed) against the composed ops on the unpacked
 * batch (matmul, gc_softmax_scaled, matmul, as nn/layers/attention.c composes them): bit for
 * bit, for texts padded on the right, on the left and with holes, an empty text, grouped key
 * heads, and lengths past the GEMM's depth block (the context's sum then splits where the
 * padded places cross it); the same bits on 1 and 2 threads; and a graph that would need
 * its gradient, or positions that do not increase, stop the program. GC_BLAS=0 throughout:
 * the composed products of long texts would otherwise go to the BLAS, whose sums are grouped
 * its own way (the op's are always the own GEMM's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "same_bytes.h"

typedef struct packed_case {
    const char *name;
    int64_t batch, length, heads, kv_heads, head_dim;
    const char *layout; /* right, left, holes */
    bool unmasked;      /* no bias: the padded places' logits 0 count in the softmax */
} packed_case;

/* Whether place t of text b holds a real token: texts of length - 3 b tokens (none when that
 * is not positive), at the right, the left, or every third place empty. */
static bool is_real(const packed_case *c, int64_t b, int64_t t) {
    int64_t count = c->length - 3 * b;
    if (count <= 0) return false;
    if (!strcmp(c->layout, "left")) return t >= c->length - count;
    if (!strcmp(c->layout, "holes")) return t < count && t % 3 != 1;
    return t < count;
}

typedef struct packed_inputs {
    gc_tensor *q, *k, *v;      /* packed [N, H * Dh], [N, KVH * Dh] */
    gc_tensor *positions;      /* i32 [N] */
    gc_tensor *bias;           /* [B, 1, 1, T]: -10000 on padding; NULL when the case is unmasked */
    int64_t tokens;
} packed_inputs;

static packed_inputs make_inputs(const packed_case *c, uint64_t seed) {
    int64_t places = c->batch * c->length, tokens = 0;
    int32_t *positions = malloc((size_t)places * sizeof *positions);
    float *bias = malloc((size_t)places * sizeof *bias);
    REQUIRE(positions && bias);
    for (int64_t p = 0; p < places; p++) {
        bool real = is_real(c, p / c->length, p % c->length);
        bias[p] = real ? 0.0f : -10000.0f;
        if (real) positions[tokens++] = (int32_t)p;
    }
    packed_inputs in = {.tokens = tokens};
    in.q = gc_test_random_in(GC_SHAPE(tokens, c->heads * c->head_dim), GC_F32, -2, 2, seed);
    in.k = gc_test_random_in(GC_SHAPE(tokens, c->kv_heads * c->head_dim), GC_F32, -2, 2, seed + 1);
    in.v = gc_test_random_in(GC_SHAPE(tokens, c->kv_heads * c->head_dim), GC_F32, -2, 2, seed + 2);
    in.positions = gc_from_host(positions, GC_SHAPE(tokens), GC_I32, gc_cpu());
    in.bias = gc_from_host(bias, GC_SHAPE(c->batch, 1, 1, c->length), GC_F32, gc_cpu());
    REQUIRE(in.q && in.k && in.v && in.positions && in.bias);
    if (c->unmasked) {
        gc_tensor_release(in.bias);
        in.bias = NULL;
    }
    free(positions);
    free(bias);
    return in;
}

/* x [N, heads * Dh] unpacked to [B, heads, T, Dh], 0 on the padding (as gc_tokens_unpack and
 * the layer's permute leave it). */
static gc_tensor *unpack_heads(const packed_case *c, const packed_inputs *in, const gc_tensor *x, int64_t heads) {
    int64_t width = heads * c->head_dim;
    float *padded = calloc((size_t)(c->batch * c->length * width), sizeof *padded);
    REQUIRE(padded);
    const float *rows = gc_data(x);
    const int32_t *positions = gc_data(in->positions);
    for (int64_t r = 0; r < in->tokens; r++)
        memcpy(padded + positions[r] * width, rows + r * width, (size_t)width * sizeof *padded);
    gc_tensor *flat = gc_from_host(padded, GC_SHAPE(c->batch, c->length, heads, c->head_dim), GC_F32, gc_cpu());
    free(padded);
    gc_tensor *per_head = gc_permute(flat, (const int[]){0, 2, 1, 3});
    gc_tensor_release(flat);
    REQUIRE(per_head);
    return per_head;
}

/* The composed context's rows of the real tokens [N, H * Dh]. */
static gc_tensor *composed_context(const packed_case *c, const packed_inputs *in) {
    int64_t groups = c->heads / c->kv_heads, t = c->length, dh = c->head_dim;
    gc_tensor *q = unpack_heads(c, in, in->q, c->heads), *k = unpack_heads(c, in, in->k, c->kv_heads);
    gc_tensor *v = unpack_heads(c, in, in->v, c->kv_heads);
    gc_tensor *grouped = gc_reshape(q, GC_SHAPE(c->batch * c->kv_heads, groups * t, dh));
    gc_tensor *keys = gc_reshape(k, GC_SHAPE(c->batch * c->kv_heads, t, dh));
    gc_tensor *values = gc_reshape(v, GC_SHAPE(c->batch * c->kv_heads, t, dh));
    gc_tensor *scores = gc_matmul(grouped, keys, false, true);
    gc_tensor *per_head = gc_reshape(scores, GC_SHAPE(c->batch, c->heads, t, t));
    gc_tensor *probs = gc_softmax_scaled(per_head, 1 / sqrt((double)dh), in->bias);
    gc_tensor *flat_probs = gc_reshape(probs, GC_SHAPE(c->batch * c->kv_heads, groups * t, t));
    gc_tensor *context = gc_matmul(flat_probs, values, false, false);
    gc_tensor *heads = gc_reshape(context, GC_SHAPE(c->batch, c->heads, t, dh));
    gc_tensor *by_token = gc_permute(heads, (const int[]){0, 2, 1, 3});
    gc_tensor *rows = gc_reshape(by_token, GC_SHAPE(c->batch * t, c->heads * dh));
    gc_tensor *real = gc_embedding(rows, in->positions);
    REQUIRE(real);
    RELEASE(q, k, v, grouped, keys, values, scores, per_head, probs, flat_probs, context, heads, by_token, rows);
    return real;
}

static gc_tensor *packed_context(const packed_case *c, const packed_inputs *in) {
    gc_attention_packed_shape shape = {.batch = c->batch, .length = c->length, .heads = c->heads,
                                       .kv_heads = c->kv_heads, .head_dim = c->head_dim,
                                       .scale = 1 / sqrt((double)c->head_dim)};
    gc_tensor *out = gc_attention_packed(in->q, in->k, in->v, in->positions, in->bias, &shape);
    REQUIRE(out);
    return out;
}

static const packed_case cases[] = {
    {"right", 4, 13, 4, 4, 8, "right", false},
    {"left", 4, 13, 4, 4, 8, "left", false},
    {"holes", 4, 13, 4, 4, 8, "holes", false},
    {"empty text", 6, 12, 2, 2, 16, "right", false}, /* text 4 has 0 tokens, text 5 none either */
    {"grouped key heads", 3, 11, 6, 2, 8, "left", false},
    {"one token", 1, 1, 2, 1, 4, "right", false},
    {"past the depth block", 3, 300, 2, 1, 8, "holes", false}, /* places 0-255 and 256-299 */
    {"past the depth block, left", 2, 520, 1, 1, 4, "left", false},
    /* a text after a longer one in the same thread finds that one's values in its padded
     * places' scratch, which only a mask would hide */
    {"right, unmasked", 4, 13, 4, 4, 8, "right", true},
    {"holes, unmasked", 4, 13, 4, 4, 8, "holes", true},
};

static void test_composed_bits(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const packed_case *c = &cases[i];
        packed_inputs in = make_inputs(c, 10 + 3 * i);
        gc_tensor *want = composed_context(c, &in), *got = packed_context(c, &in);
        CHECK_MSG(got->shape[0] == in.tokens && got->shape[1] == c->heads * c->head_dim, "%s: shape", c->name);
        gc_test_expect_same_bytes(want, got, c->name);
        RELEASE(want, got, in.q, in.k, in.v, in.positions, in.bias);
    }
}

/* Each text and head is computed whole by one thread: the thread count changes no bit. */
static void test_thread_count(void) {
    const packed_case *c = &cases[4];
    packed_inputs in = make_inputs(c, 77);
    int threads = gc_cpu_threads();
    gc_set_cpu_threads(1);
    gc_tensor *one = packed_context(c, &in);
    gc_set_cpu_threads(2);
    gc_tensor *two = packed_context(c, &in);
    gc_set_cpu_threads(threads);
    gc_test_expect_same_bytes(one, two, "2 threads against 1");
    RELEASE(one, two, in.q, in.k, in.v, in.positions, in.bias);
}

static void record_packed(void *arg) {
    (void)arg;
    packed_inputs in = make_inputs(&cases[0], 5);
    gc_set_requires_grad(in.q, true);
    gc_tensor *out = packed_context(&cases[0], &in);
    gc_tensor_release(out);
}

static void test_refuses_a_graph(void) {
    gc_test_expect_fatal(record_packed, NULL, "attention_packed: no backward");
}

/* positions that go back (two rows at one place) are a programmer error, named with its row */
static void repeated_position(void *arg) {
    (void)arg;
    packed_inputs in = make_inputs(&cases[0], 6);
    int32_t *positions = gc_data(in.positions);
    positions[2] = positions[1];
    gc_tensor_release(packed_context(&cases[0], &in));
}

static void test_refuses_bad_positions(void) {
    gc_test_expect_fatal(repeated_position, NULL, "attention_packed: position 1 at row 2");
}

int main(void) {
    setenv("GC_BLAS", "0", 1);
    gc_tensor *probe = gc_test_random(GC_SHAPE(1, 1), GC_F32, 1);
    bool available = gc_attention_packed_available(probe);
    gc_tensor_release(probe);
    if (!available) { /* GC_COMPOSED_OPS=1: the CPU runs without its fused kernels */
        printf("no attention_packed kernel on this backend\n");
        return GC_TEST_SKIP;
    }
    GC_TEST_CASE(test_composed_bits);
    GC_TEST_CASE(test_thread_count);
    GC_TEST_CASE(test_refuses_a_graph);
    GC_TEST_CASE(test_refuses_bad_positions);
    return gc_test_result();
}
