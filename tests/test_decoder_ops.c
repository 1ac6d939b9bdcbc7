/* The decoder family's ops on the CPU: RMSNorm, rotary positions and SwiGLU's gated product
 * against the formulas computed here in double, their gradients against central differences
 * (f64), the 16-bit dtypes against f32, and the programmer errors. */
#include <math.h>

#include "gradcheck.h"
#include "tensor/op_internal.h"
#include "values.h"

/* A result computed in double (RMSNorm) or in float (RoPE, SwiGLU: each operation rounded)
 * and rounded to f32: within a few f32 roundings, 2^-24 relative each. */
#define F32_ROUNDING (1.0 / (1 << 24))

static double *host_values(const gc_tensor *t) {
    double *values = malloc(sizeof(double) * (size_t)gc_numel(t));
    REQUIRE(values);
    gc_to_host_f64(t, values);
    return values;
}

/* rows of x [rows, cols] normalised: x / sqrt(mean(x^2) + eps) * w (w NULL: 1), in double. */
static void rmsnorm_reference(const double *x, const double *w, int64_t rows, int64_t cols, double eps, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        double squares = 0;
        for (int64_t c = 0; c < cols; c++) squares += x[r * cols + c] * x[r * cols + c];
        double rstd = 1 / sqrt(squares / (double)cols + eps);
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] = x[r * cols + c] * rstd * (w ? w[c] : 1);
    }
}

/* Rows [1, 2, 3, 4] (mean square 7.5) and a constant row: f32 and f64, with and without a
 * weight. */
static void test_rmsnorm_values(void) {
    const double x_values[8] = {1, 2, 3, 4, -2, -2, -2, -2}, w_values[4] = {2, 0.5, -1, 1};
    for (int d = 0; d < 2; d++) {
        gc_dtype dtype = d ? GC_F64 : GC_F32;
        gc_tensor *x = gc_test_tensor(dtype, GC_SHAPE(2, 4), x_values);
        gc_tensor *w = gc_test_tensor(dtype, GC_SHAPE(4), w_values);
        double want[8], want_plain[8];
        rmsnorm_reference(x_values, w_values, 2, 4, 1e-6, want);
        rmsnorm_reference(x_values, NULL, 2, 4, 1e-6, want_plain);
        gc_tensor *y = gc_rmsnorm(x, w, 1e-6), *plain = gc_rmsnorm(x, NULL, 1e-6);
        double rtol = dtype == GC_F32 ? F32_ROUNDING : 1e-15;
        gc_test_expect_values(y, dtype, GC_SHAPE(2, 4), want, 0, rtol, "rmsnorm with a weight");
        gc_test_expect_values(plain, dtype, GC_SHAPE(2, 4), want_plain, 0, rtol, "rmsnorm without a weight");
        RELEASE(x, w, y, plain);
    }
}

static gc_tensor *rmsnorm_op(gc_tensor *const *inputs, const void *context) {
    (void)context;
    return gc_rmsnorm(inputs[0], inputs[1], 1e-3);
}

static gc_tensor *rmsnorm_no_weight_op(gc_tensor *const *inputs, const void *context) {
    (void)context;
    return gc_rmsnorm(inputs[0], NULL, 1e-3);
}

/* Rows near 0 too (eps matters there), a 3-D x (the weight's gradient summed over two dims). */
static void test_rmsnorm_gradcheck(void) {
    gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 3, 5), -1, 1, 11);
    gc_tensor *w = gc_test_leaf(GC_SHAPE(5), 0.5, 1.5, 12);
    gc_tensor *small = gc_test_leaf(GC_SHAPE(2, 4), -0.01, 0.01, 13);
    gc_test_gradcheck("rmsnorm", rmsnorm_op, (gc_tensor *[]){x, w}, 2, NULL);
    gc_test_gradcheck("rmsnorm without weight, rows near 0", rmsnorm_no_weight_op, (gc_tensor *[]){small}, 1, NULL);
    RELEASE(x, w, small);
}

/* x [B, T, H, Dh] rotated by hand: pair (i, i + Dh/2) of position t by the angle
 * t / (theta^(2i/Dh) scale), in double. */
static void rope_reference(const double *x, int64_t batch, int64_t length, int64_t heads, int64_t dim, double theta,
                           double scale, double *y) {
    int64_t half = dim / 2;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < length; t++)
            for (int64_t h = 0; h < heads; h++)
                for (int64_t i = 0; i < half; i++) {
                    int64_t first = ((b * length + t) * heads + h) * dim;
                    double angle = (double)t / (pow(theta, 2.0 * (double)i / (double)dim) * scale);
                    double a = x[first + i], c = x[first + i + half];
                    y[first + i] = a * cos(angle) - c * sin(angle);
                    y[first + i + half] = c * cos(angle) + a * sin(angle);
                }
}

/* f64 against the reference to rounding; f32 within its table's error (each angle rounded
 * to f32 as transformers does: at position t < 8 an angle is off by at most 2^-24 8, so a
 * cosine by as much) and the products' roundings. The linear scaling divides the angles. */
static void test_rope_values(void) {
    const double scales[2] = {1, 2.5};
    for (int s = 0; s < 2; s++) {
        for (int d = 0; d < 2; d++) {
            gc_dtype dtype = d ? GC_F64 : GC_F32;
            gc_tensor *x = gc_test_random(GC_SHAPE(2, 7, 3, 8), dtype, 21);
            gc_tensor *table = gc_rope_table(7, 8, 10000, scales[s], dtype, gc_cpu());
            gc_tensor *y = gc_rope(x, table);
            double *x_values = host_values(x), want[2 * 7 * 3 * 8];
            rope_reference(x_values, 2, 7, 3, 8, 10000, scales[s], want);
            char what[64];
            snprintf(what, sizeof what, "rope %s, scale %g", gc_dtype_name(dtype), scales[s]);
            gc_test_expect_values(y, dtype, GC_SHAPE(2, 7, 3, 8), want, dtype == GC_F32 ? 32 * F32_ROUNDING : 1e-15,
                                  dtype == GC_F32 ? 4 * F32_ROUNDING : 1e-15, what);
            free(x_values);
            RELEASE(x, table, y);
        }
    }
}

/* A rotation keeps the norm of each pair, and its inverse brings x back. */
static void test_rope_inverse(void) {
    gc_tensor *x = gc_test_random(GC_SHAPE(1, 5, 2, 6), GC_F64, 31);
    gc_tensor *table = gc_rope_table(5, 6, 1e6, 1, GC_F64, gc_cpu());
    gc_tensor *y = gc_rope(x, table);
    gc_tensor *back = gc_rope_inverse(y, table);
    gc_test_expect_close(x, back, 1e-15, 1e-15, "rope then its inverse");
    RELEASE(x, table, y, back);
}

static gc_tensor *rope_op(gc_tensor *const *inputs, const void *context) {
    return gc_rope(inputs[0], context);
}

static void test_rope_gradcheck(void) {
    gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 3, 2, 4), -1, 1, 41);
    gc_tensor *table = gc_rope_table(3, 4, 100, 1, GC_F64, gc_cpu());
    gc_test_gradcheck("rope", rope_op, (gc_tensor *[]){x}, 1, table);
    RELEASE(x, table);
}

/* silu(gate) up = gate up / (1 + e^-gate), in double; far out in both directions too, where
 * e^-gate overflows (the kernel never computes it there). */
static void test_swiglu_values(void) {
    const double gate[8] = {-1000, -30, -1, -0.25, 0, 0.5, 3, 1000}, up[8] = {1, 2, -1, 4, 5, -0.5, 0.25, 2};
    double want[8];
    for (int i = 0; i < 8; i++) want[i] = gate[i] / (1 + exp(-gate[i])) * up[i];
    for (int d = 0; d < 2; d++) {
        gc_dtype dtype = d ? GC_F64 : GC_F32;
        gc_tensor *g = gc_test_tensor(dtype, GC_SHAPE(8), gate), *u = gc_test_tensor(dtype, GC_SHAPE(8), up);
        gc_tensor *y = gc_swiglu(g, u);
        gc_test_expect_values(y, dtype, GC_SHAPE(8), want, 1e-300, dtype == GC_F32 ? 8 * F32_ROUNDING : 1e-15,
                              dtype == GC_F32 ? "swiglu f32" : "swiglu f64");
        RELEASE(g, u, y);
    }
}

static gc_tensor *swiglu_op(gc_tensor *const *inputs, const void *context) {
    (void)context;
    return gc_swiglu(inputs[0], inputs[1]);
}

static void test_swiglu_gradcheck(void) {
    gc_tensor *gate = gc_test_leaf(GC_SHAPE(3, 7), -4, 4, 51), *up = gc_test_leaf(GC_SHAPE(3, 7), -2, 2, 52);
    gc_test_gradcheck("swiglu", swiglu_op, (gc_tensor *[]){gate, up}, 2, NULL);
    RELEASE(gate, up);
}

/* f16 and bf16 are computed in f32 and rounded once: within one step of the stored type of
 * the f32 result computed from the same (rounded) inputs. */
static void test_half_dtypes(void) {
    const gc_dtype halves[2] = {GC_F16, GC_BF16};
    for (int h = 0; h < 2; h++) {
        gc_dtype dtype = halves[h];
        double step = dtype == GC_F16 ? 1.0 / 1024 : 1.0 / 128;
        gc_tensor *x = gc_test_random(GC_SHAPE(2, 3, 2, 8), dtype, 61), *w = gc_test_random(GC_SHAPE(8), dtype, 62);
        gc_tensor *x32 = gc_cast(x, GC_F32), *w32 = gc_cast(w, GC_F32);
        gc_tensor *table = gc_rope_table(3, 8, 10000, 1, dtype, gc_cpu());
        gc_tensor *outputs[3] = {gc_rmsnorm(x, w, 1e-6), gc_rope(x, table), gc_swiglu(x, x)};
        gc_tensor *wanted[3] = {gc_rmsnorm(x32, w32, 1e-6), gc_rope(x32, table), gc_swiglu(x32, x32)};
        const char *names[3] = {"rmsnorm", "rope", "swiglu"};
        for (int i = 0; i < 3; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", names[i], gc_dtype_name(dtype));
            CHECK_MSG(outputs[i] && outputs[i]->dtype == dtype, "%s: dtype", what);
            gc_test_expect_close(wanted[i], outputs[i], 1e-4, step, what);
        }
        RELEASE(x, w, x32, w32, table, outputs[0], outputs[1], outputs[2], wanted[0], wanted[1], wanted[2]);
    }
}

static void rmsnorm_bad_weight(void *arg) {
    (void)arg;
    gc_rmsnorm(gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu()), gc_zeros(GC_SHAPE(3), GC_F32, gc_cpu()), 1e-6);
}
static void rope_odd_dim(void *arg) {
    (void)arg;
    gc_tensor *table = gc_rope_table(2, 4, 10000, 1, GC_F32, gc_cpu());
    gc_rope(gc_zeros(GC_SHAPE(1, 2, 1, 3), GC_F32, gc_cpu()), table);
}
static void swiglu_shapes(void *arg) {
    (void)arg;
    gc_swiglu(gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu()), gc_zeros(GC_SHAPE(4, 2), GC_F32, gc_cpu()));
}

static void test_programmer_errors(void) {
    gc_test_expect_fatal(rmsnorm_bad_weight, NULL, "rmsnorm: weight [3] f32 cpu is not [4]");
    gc_test_expect_fatal(rope_odd_dim, NULL, "rope: x [1, 2, 1, 3] f32 cpu is not [B, T, H, Dh]");
    gc_test_expect_fatal(swiglu_shapes, NULL, "swiglu: gate [2, 4] f32 cpu and up [4, 2] f32 cpu differ in shape");
}

int main(void) {
    GC_TEST_CASE(test_rmsnorm_values);
    GC_TEST_CASE(test_rmsnorm_gradcheck);
    GC_TEST_CASE(test_rope_values);
    GC_TEST_CASE(test_rope_inverse);
    GC_TEST_CASE(test_rope_gradcheck);
    GC_TEST_CASE(test_swiglu_values);
    GC_TEST_CASE(test_swiglu_gradcheck);
    GC_TEST_CASE(test_half_dtypes);
    GC_TEST_CASE(test_programmer_errors);
    return gc_test_result();
}
