/* gc_softmax_scaled, attention's softmax(scale x + bias) in one pass, on the CPU: equal to
 * the ops it replaces (mul_scalar, a broadcast add, softmax) bit for bit in f32 and f64 (it
 * rounds the scaled, biased row as they do), close in f16 and bf16 (it rounds that row once
 * where they round twice), for every layout of the bias; its gradient against finite
 * differences, and bit for bit the composed ops' (the CPU's fused softmax backward; the cpu
 * suite runs this program again with GC_COMPOSED_OPS=1, without it), with any number of
 * threads; the f32 row's AVX2 build bit for bit the portable one's, and the rows taken many
 * at once down columns bit for bit the row's; a masked key's
 * probability exactly 0; and the refusals. */
#include "check.h"
#include "gradcheck.h"
#include "tensor/cpu/kernels_cpu.h"
#include "values.h"

enum { B = 2, H = 3, Q = 4, C = 5 };

/* The bias layouts the op takes for x [B, H, Q, C]: per key ([B, 1, 1, C], BERT's padding),
 * per query and key ([1, 1, Q, C], a causal mask), both ([B, 1, Q, C]). */
static const int64_t bias_shapes[][4] = {{B, 1, 1, C}, {1, 1, Q, C}, {B, 1, Q, C}};
#define LAYOUTS (int)(sizeof bias_shapes / sizeof *bias_shapes)

static const double scale = 0.375; /* 1 / sqrt(Dh) of no particular Dh: not a power of two */

/* What the op replaces: softmax(x * scale + bias), three ops. */
static gc_tensor *composed(const gc_tensor *x, const gc_tensor *bias) {
    gc_tensor *scaled = gc_mul_scalar(x, scale);
    gc_tensor *biased = bias ? gc_add(scaled, bias) : gc_tensor_retain(scaled);
    gc_tensor *y = gc_softmax(biased);
    gc_tensor_release(scaled);
    gc_tensor_release(biased);
    return y;
}

static gc_tensor *random_bias(int layout, gc_dtype dtype) {
    return gc_test_random_in(4, bias_shapes[layout], dtype, -2, 2, 40 + (uint64_t)layout);
}

static void test_equals_composed(void) {
    const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16};
    for (int d = 0; d < 4; d++) {
        gc_dtype dtype = dtypes[d];
        gc_tensor *x = gc_test_random_in(GC_SHAPE(B, H, Q, C), dtype, -4, 4, 7);
        for (int layout = -1; layout < LAYOUTS; layout++) {
            gc_tensor *bias = layout < 0 ? NULL : random_bias(layout, dtype);
            gc_tensor *want = composed(x, bias), *got = gc_softmax_scaled(x, scale, bias);
            REQUIRE(want && got);
            char what[96];
            snprintf(what, sizeof what, "%s, bias layout %d", gc_dtype_name(dtype), layout);
            if (dtype == GC_F32 || dtype == GC_F64) {
                gc_test_expect_close(want, got, 0, 0, what);
            } else {
                /* The logits |scale x + bias| <= 3.5 differ by one rounding of the input
                 * (2^-11 relative in f16, 2^-8 in bf16), at most 3.5 * 2^-p absolute, which
                 * moves a probability by at most twice that relative; each output is then
                 * rounded once more: rtol 8 * 2^-p covers both. */
                double unit = dtype == GC_F16 ? 0x1p-11 : 0x1p-8;
                gc_test_expect_close(want, got, 0, 8 * unit, what);
            }
            RELEASE(want, got, bias);
        }
        gc_tensor_release(x);
    }
}

/* BERT's padding bias (-10000 on a hidden key) gives a hidden key exactly 0, and the rows
 * still sum to 1: x [1, 1, 2, 3] with the last key hidden. */
static void test_masked_key(void) {
    const double x_values[] = {1, 2, 3, -1, 0, 1}, bias_values[] = {0, 0, -10000};
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(1, 1, 2, 3), x_values);
    gc_tensor *bias = gc_test_tensor(GC_F32, GC_SHAPE(1, 1, 1, 3), bias_values);
    gc_tensor *y = gc_softmax_scaled(x, 1, bias);
    REQUIRE(y);
    double got[6];
    gc_to_host_f64(y, got);
    for (int row = 0; row < 2; row++) {
        CHECK_MSG(got[3 * row + 2] == 0, "row %d: the hidden key has probability %g", row, got[3 * row + 2]);
        /* two keys a logit apart: e / (1 + e) and 1 / (1 + e), to f32's rounding */
        CHECK_MSG(fabs(got[3 * row + 1] - exp(1) / (1 + exp(1))) < 1e-7, "row %d: %.9g", row, got[3 * row + 1]);
    }
    RELEASE(x, bias, y);
}

typedef struct { const gc_tensor *bias; } scaled_case;
static gc_tensor *op_softmax_scaled(gc_tensor *const *x, const void *c) {
    return gc_softmax_scaled(x[0], scale, ((const scaled_case *)c)->bias);
}

static void test_gradient(void) {
    for (int layout = -1; layout < LAYOUTS; layout++) {
        gc_tensor *x = gc_test_leaf(GC_SHAPE(B, H, Q, C), -3, 3, 90 + (uint64_t)(layout + 1));
        scaled_case c = {layout < 0 ? NULL : random_bias(layout, GC_F64)};
        gc_test_gradcheck("softmax_scaled", op_softmax_scaled, &x, 1, &c);
        gc_tensor_release(x);
        gc_tensor_release((gc_tensor *)c.bias);
    }
}

/* The softmax's input gradient as the ops compose it: scale y (g - sum(g y)). */
static gc_tensor *composed_input_grad(const gc_tensor *y, const gc_tensor *g, double by) {
    gc_tensor *gy = gc_mul(g, y), *total = gc_sum_last(gy, true), *centred = gc_sub(g, total);
    gc_tensor *dx = gc_mul(y, centred), *scaled = by == 1.0 ? gc_tensor_retain(dx) : gc_mul_scalar(dx, by);
    RELEASE(gy, total, centred, dx);
    return scaled;
}

/* x's gradient through gc_backward from g, with `threads` threads. */
static gc_tensor *backward_grad(const gc_tensor *x_values, const gc_tensor *bias, const gc_tensor *g, double by,
                                int threads, gc_tensor **y_out) {
    gc_set_cpu_threads(threads);
    gc_tensor *x = gc_clone(x_values);
    REQUIRE(x);
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_softmax_scaled(x, by, bias);
    REQUIRE(y && gc_backward(&y, (gc_tensor *[]){(gc_tensor *)g}, 1) == GC_OK);
    gc_tensor *grad = gc_tensor_retain(gc_grad(x));
    *y_out = y;
    gc_tensor_release(x);
    return grad;
}

/* The backward bit for bit the composed ops', in f32 and f64, at rows of one key, of a few,
 * of attention's 32 (plus one: not a multiple of the sum's four lanes) and longer than one
 * chunk of the row kernels (256), scale 1 (no product) or not; 1 and 3 threads alike. */
static void test_gradient_equals_composed(void) {
    const gc_dtype dtypes[] = {GC_F32, GC_F64};
    const int64_t columns[] = {1, 5, 33, 300};
    const double scales[] = {1.0, scale};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 4; c++)
            for (int s = 0; s < 2; s++) {
                int64_t shape[4] = {B, H, Q, columns[c]}, bias_shape[4] = {B, 1, 1, columns[c]};
                gc_tensor *x = gc_test_random_in(4, shape, dtypes[d], -4, 4, 60 + (uint64_t)c);
                gc_tensor *g = gc_test_random_in(4, shape, dtypes[d], -1, 1, 70 + (uint64_t)c);
                gc_tensor *bias = gc_test_random_in(4, bias_shape, dtypes[d], -2, 2, 80 + (uint64_t)c);
                gc_tensor *y = NULL, *y3 = NULL;
                gc_tensor *got = backward_grad(x, bias, g, scales[s], 1, &y);
                gc_tensor *got3 = backward_grad(x, bias, g, scales[s], 3, &y3);
                gc_tensor *want = composed_input_grad(y, g, scales[s]);
                REQUIRE(got && got3 && want);
                char what[96];
                snprintf(what, sizeof what, "%s, %lld columns, scale %g", gc_dtype_name(dtypes[d]),
                         (long long)columns[c], scales[s]);
                gc_test_expect_close(want, got, 0, 0, what);
                gc_test_expect_close(got, got3, 0, 0, what);
                RELEASE(x, g, bias, y, y3, got, got3, want);
            }
    gc_set_cpu_threads(1);
}

/* Every instruction set's f32 row gives the portable build's bits: rows of 1 to 300 keys
 * (odd lengths leave a vector's tail; 300 is more than one chunk of the sum), staged (a
 * scale, a bias) or not, with masked keys (-10000), values whose exps underflow, and rows
 * holding a nan or an infinity. */
static void test_row_variants(void) {
    enum { MAX_COLS = 300 };
    const size_t columns[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 33, MAX_COLS};
    static float x[MAX_COLS], bias[MAX_COLS], want[MAX_COLS], got[MAX_COLS];
    uint64_t state = 12345;
    for (int kind = 0; kind < 4; kind++)
        for (size_t c = 0; c < sizeof columns / sizeof *columns; c++) {
            size_t cols = columns[c];
            for (size_t j = 0; j < cols; j++) {
                state = state * 6364136223846793005u + 1442695040888963407u;
                x[j] = (float)((double)(state >> 40) / (double)(1u << 24) * 60.0 - 30.0); /* [-30, 30) */
                bias[j] = j % 5 == 4 ? -10000.0f : (float)(j % 3) * 0.25f;
            }
            if (kind == 2) x[cols / 2] = NAN;
            if (kind == 3) x[cols - 1] = INFINITY;
            for (int staged = 0; staged < 2; staged++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    const float *b = with_bias ? bias : NULL, by = kind == 1 ? 1.0f : (float)scale;
                    bool stage = staged || with_bias;
                    gc_cpu_softmax_row_f32_on(GC_ISA_PORTABLE, x, b, by, stage, want, cols);
                    for (gc_cpu_isa isa = GC_ISA_PORTABLE + 1; isa < GC_ISA_COUNT; isa++) {
                        if (!gc_cpu_isa_available(isa)) continue;
                        gc_cpu_softmax_row_f32_on(isa, x, b, by, stage, got, cols);
                        CHECK_MSG(memcmp(want, got, cols * sizeof *got) == 0,
                                  "isa %d, kind %d, %zu columns, staged %d, bias %d", (int)isa, kind, cols, stage,
                                  with_bias);
                    }
                }
        }
}

/* Many queries at once, stored down columns (attention over packed tokens): each query's
 * probabilities are the row function's bits, in every instruction set's build, for 1 to 300
 * places, 1 to 70 queries (a vector's tail, more than one pass of GC_SOFTMAX_COLUMNS), staged
 * or not, with masked keys, underflowing exps, a nan and an infinity. */
static void test_columns(void) {
    enum { MAX_PLACES = 300, MAX_QUERIES = 70, STRIDE = MAX_QUERIES + 3 };
    const size_t places_counts[] = {1, 2, 5, 8, 13, 33, MAX_PLACES}, query_counts[] = {1, 5, 8, 13, MAX_QUERIES};
    static float x[MAX_PLACES * STRIDE], got[MAX_PLACES * STRIDE], row[MAX_PLACES], want[MAX_PLACES];
    static float bias[MAX_PLACES];
    uint64_t state = 777;
    for (size_t c = 0; c < sizeof places_counts / sizeof *places_counts; c++) {
        size_t places = places_counts[c];
        for (size_t t = 0; t < places; t++) {
            bias[t] = t % 5 == 4 ? -10000.0f : (float)(t % 3) * 0.25f;
            for (int q = 0; q < MAX_QUERIES; q++) {
                state = state * 6364136223846793005u + 1442695040888963407u;
                x[t * STRIDE + q] = (float)((double)(state >> 40) / (double)(1u << 24) * 60.0 - 30.0);
            }
        }
        x[(places / 2) * STRIDE + 2] = NAN;
        x[(places - 1) * STRIDE + 5] = INFINITY;
        for (size_t k = 0; k < sizeof query_counts / sizeof *query_counts; k++)
            for (int kind = 0; kind < 3; kind++) { /* plain, scaled, scaled and biased */
                size_t queries = query_counts[k];
                const float *b = kind == 2 ? bias : NULL, by = kind == 0 ? 1.0f : (float)scale;
                for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++) {
                    if (!gc_cpu_isa_available(isa)) continue;
                    gc_cpu_softmax_columns_f32_on(isa, x, b, by, kind > 0, got, places, STRIDE, queries);
                    for (size_t q = 0; q < queries; q++) {
                        for (size_t t = 0; t < places; t++) row[t] = x[t * STRIDE + q];
                        gc_cpu_softmax_row_f32_on(GC_ISA_PORTABLE, row, b, by, kind > 0, want, places);
                        for (size_t t = 0; t < places; t++) row[t] = got[t * STRIDE + q];
                        CHECK_MSG(memcmp(want, row, places * sizeof *row) == 0,
                                  "isa %d, %zu places, %zu queries, kind %d, query %zu", (int)isa, places, queries,
                                  kind, q);
                    }
                }
            }
    }
}

/* --- refusals ------------------------------------------------------------------------------ */

static void call_wrong_bias(void *arg) {
    (void)arg;
    gc_tensor *x = gc_zeros(GC_SHAPE(B, H, Q, C), GC_F32, gc_cpu());
    gc_tensor *bias = gc_zeros(GC_SHAPE(B, H, 1, C), GC_F32, gc_cpu()); /* per head: not a layout */
    gc_softmax_scaled(x, 1, bias);
}

static void call_three_dims(void *arg) {
    (void)arg;
    gc_softmax_scaled(gc_zeros(GC_SHAPE(H, Q, C), GC_F32, gc_cpu()), 1, NULL);
}

static void call_other_dtype(void *arg) {
    (void)arg;
    gc_tensor *x = gc_zeros(GC_SHAPE(B, H, Q, C), GC_F32, gc_cpu());
    gc_softmax_scaled(x, 1, gc_zeros(GC_SHAPE(B, 1, 1, C), GC_F64, gc_cpu()));
}

static void call_bias_with_gradient(void *arg) {
    (void)arg;
    gc_tensor *x = gc_zeros(GC_SHAPE(1, 1, 1, C), GC_F64, gc_cpu());
    gc_tensor *bias = gc_zeros(GC_SHAPE(1, 1, 1, C), GC_F64, gc_cpu());
    gc_set_requires_grad(bias, true);
    gc_tensor *loss = gc_sum_all(gc_softmax_scaled(x, 1, bias));
    gc_backward(&loss, NULL, 1);
}

static void test_refusals(void) {
    gc_test_expect_fatal(call_wrong_bias, NULL,
                         "softmax_scaled: bias [2, 3, 1, 5] f32 cpu is not [1 or 2, 1, 1 or 4, 5] for x [2, 3, 4, 5]");
    gc_test_expect_fatal(call_three_dims, NULL, "softmax_scaled: x [3, 4, 5] f32 cpu is not [B, H, Q, C]");
    gc_test_expect_fatal(call_other_dtype, NULL, "softmax_scaled");
    gc_test_expect_fatal(call_bias_with_gradient, NULL, "softmax_scaled: the bias is a constant mask");
}

int main(void) {
    GC_TEST_CASE(test_equals_composed);
    GC_TEST_CASE(test_masked_key);
    GC_TEST_CASE(test_gradient);
    GC_TEST_CASE(test_gradient_equals_composed);
    GC_TEST_CASE(test_row_variants);
    GC_TEST_CASE(test_columns);
    GC_TEST_CASE(test_refusals);
    return gc_test_result();
}
