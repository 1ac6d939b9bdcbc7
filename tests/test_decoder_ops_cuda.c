/* The decoder family's CUDA kernels against the CPU's, forward and backward, every floating
 * dtype. Suite cuda: skipped where there is no GPU.
 *  - rope: the same table and the same rounded products (tensor/rope_impl.h): bitwise;
 *  - swiglu: one formula on e^y functions a few ulps apart (the CPU's own float exp against
 *    CUDA's expf): gc_test_tolerance, two steps of the stored type (for the gate's gradient,
 *    which cancels, of the terms it sums);
 *  - rmsnorm: the row's sum of squares in float on CUDA and in double on the CPU, so the
 *    summation bound of reduce_parity.h, then a handful of roundings (rstd: 3, the product
 *    with x and w: 2, and for the gradient the row's mean of gw xhat: the sum again). */
#include "reduce_parity.h"
#include "tensor/op_internal.h"

static const gc_dtype float_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

static double rmsnorm_rtol(int64_t cols, gc_dtype dtype) {
    double u = gc_test_accum_roundoff(dtype) + 0x1p-53;
    return 2 * gc_test_sum_error(cols, dtype) + 8 * u + gc_test_step_rtol(dtype);
}

static void test_rmsnorm(void) {
    const int64_t col_sizes[] = {1, 7, 64, 896, 4099};
    for (int d = 0; d < COUNT(float_dtypes); d++)
        for (int c = 0; c < COUNT(col_sizes); c++) {
            gc_dtype dtype = float_dtypes[d];
            int64_t cols = col_sizes[c];
            gc_tensor *x = gc_test_random(GC_SHAPE(3, 5, cols), dtype, 100 + (uint64_t)c);
            gc_tensor *w = gc_test_random(GC_SHAPE(cols), dtype, 200 + (uint64_t)c);
            gc_tensor *g = gc_test_random(GC_SHAPE(3, 5, cols), dtype, 300 + (uint64_t)c);
            gc_tensor *x_gpu = gc_test_to_cuda(x), *w_gpu = gc_test_to_cuda(w), *g_gpu = gc_test_to_cuda(g);
            gc_tensor *y = gc_rmsnorm(x, w, 1e-6), *y_gpu = gc_rmsnorm(x_gpu, w_gpu, 1e-6);
            gc_tensor *dx, *g_xhat, *dx_gpu, *g_xhat_gpu;
            REQUIRE(gc_rmsnorm_backward(x, w, g, 1e-6, &dx, &g_xhat));
            REQUIRE(gc_rmsnorm_backward(x_gpu, w_gpu, g_gpu, 1e-6, &dx_gpu, &g_xhat_gpu));
            double rtol = rmsnorm_rtol(cols, dtype), tiny = gc_test_tiny(dtype);
            char what[96];
            snprintf(what, sizeof what, "rmsnorm %s [3, 5, %lld]", gc_dtype_name(dtype), (long long)cols);
            gc_test_expect_close(y, y_gpu, tiny, rtol, what);
            /* dx subtracts two terms of the row's size: its error is relative to them, not to dx */
            gc_test_expect_close(dx, dx_gpu, tiny + rtol * 4 * gc_test_max_abs(g, 0) * gc_test_max_abs(w, 0), rtol,
                                 "rmsnorm dx");
            gc_test_expect_close(g_xhat, g_xhat_gpu, tiny, rtol, "rmsnorm g xhat");
            RELEASE(x, w, g, x_gpu, w_gpu, g_gpu, y, y_gpu, dx, g_xhat, dx_gpu, g_xhat_gpu);
        }
}

static void test_rope(void) {
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        gc_dtype dtype = float_dtypes[d];
        gc_tensor *x = gc_test_random(GC_SHAPE(2, 33, 3, 64), dtype, 400);
        gc_tensor *table = gc_rope_table(33, 64, 1e6, 2, dtype, gc_cpu()), *table_gpu = gc_test_to_cuda(table);
        gc_tensor *x_gpu = gc_test_to_cuda(x);
        gc_tensor *y = gc_rope(x, table), *y_gpu = gc_rope(x_gpu, table_gpu);
        gc_tensor *back = gc_rope_inverse(x, table), *back_gpu = gc_rope_inverse(x_gpu, table_gpu);
        gc_test_expect_close(y, y_gpu, 0, 0, gc_dtype_name(dtype));
        gc_test_expect_close(back, back_gpu, 0, 0, "rope inverse");
        RELEASE(x, table, table_gpu, x_gpu, y, y_gpu, back, back_gpu);
    }
}

/* d gate = g up s (1 + gate (1 - s)) cancels where the bracket is 0 (gate near -1.28): there
 * the two sides' sigmoids, a few ulps apart, differ by a few ulps of the terms, not of the
 * result (measured on an H100: 3.8e-10 on -3.72e-5, over rtol 1e-5 of it). So each element
 * is held to rtol of the size of what it sums, |g up s| (1 + |gate (1 - s)|). */
static void expect_d_gate_close(const gc_tensor *gate, const gc_tensor *up, const gc_tensor *g, const gc_tensor *want,
                                const gc_tensor *got, double atol, double rtol) {
    int64_t n = gc_numel(want);
    double *values[5];
    const gc_tensor *tensors[5] = {gate, up, g, want, got};
    for (int i = 0; i < 5; i++) {
        values[i] = malloc((size_t)n * sizeof(double));
        REQUIRE(values[i]);
        gc_to_host_f64(tensors[i], values[i]);
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = values[0][i], sig = 1 / (1 + exp(-x));
        double terms = fabs(values[2][i] * values[1][i] * sig) * (1 + fabs(x * (1 - sig)));
        if (!(fabs(values[4][i] - values[3][i]) <= atol + rtol * terms) && bad++ < 5)
            fprintf(stderr, "swiglu d gate: element %lld: got %.9g, want %.9g, terms of %.3g\n", (long long)i,
                    values[4][i], values[3][i], terms);
    }
    CHECK_MSG(bad == 0, "swiglu d gate %s: %lld of %lld elements differ by more than %g of their terms",
              gc_dtype_name(want->dtype), (long long)bad, (long long)n, rtol);
    for (int i = 0; i < 5; i++) free(values[i]);
}

static void test_swiglu(void) {
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        gc_dtype dtype = float_dtypes[d];
        gc_tensor *gate = gc_test_random_in(GC_SHAPE(7, 1001), dtype, -30, 30, 500);
        gc_tensor *up = gc_test_random(GC_SHAPE(7, 1001), dtype, 501), *g = gc_test_random(GC_SHAPE(7, 1001), dtype, 502);
        gc_tensor *gate_gpu = gc_test_to_cuda(gate), *up_gpu = gc_test_to_cuda(up), *g_gpu = gc_test_to_cuda(g);
        gc_tensor *y = gc_swiglu(gate, up), *y_gpu = gc_swiglu(gate_gpu, up_gpu);
        gc_tensor *d_gate, *d_up, *d_gate_gpu, *d_up_gpu;
        REQUIRE(gc_swiglu_backward(gate, up, g, &d_gate, &d_up));
        REQUIRE(gc_swiglu_backward(gate_gpu, up_gpu, g_gpu, &d_gate_gpu, &d_up_gpu));
        double rtol = gc_test_tolerance(dtype), tiny = gc_test_tiny(dtype);
        gc_test_expect_close(y, y_gpu, tiny, rtol, gc_dtype_name(dtype));
        expect_d_gate_close(gate, up, g, d_gate, d_gate_gpu, tiny, rtol);
        gc_test_expect_close(d_up, d_up_gpu, tiny, rtol, "swiglu d up");
        RELEASE(gate, up, g, gate_gpu, up_gpu, g_gpu, y, y_gpu, d_gate, d_up, d_gate_gpu, d_up_gpu);
    }
}

int main(void) {
    gc_test_require_cuda();
    GC_TEST_CASE(test_rmsnorm);
    GC_TEST_CASE(test_rope);
    GC_TEST_CASE(test_swiglu);
    return gc_test_result();
}
