/* The CUDA softmax, log-softmax and layernorm against the CPU reference and against
 * hand-computed values. Suite cuda: skipped where there is no GPU. The tolerances are
 * derived in norm_parity.h from the bounds of reduce_parity.h. */
#include <math.h>

#include "check.h"
#include "norm_parity.h"

static const gc_dtype float_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
static const int64_t col_sizes[] = {1, 7, 33, 1000, 4097};
#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

/* x [2, 3, cols] uniform in [lo, hi) on the CPU. */
static gc_tensor *uniform_rows(int64_t cols, gc_dtype dtype, double lo, double hi, uint64_t seed) {
    gc_tensor *x = gc_uniform(GC_SHAPE(2, 3, cols), dtype, gc_cpu(), lo, hi, seed, 0);
    REQUIRE(x);
    return x;
}

/* softmax and log_softmax of x (on the CPU, elements within `spread` of each other) on
 * both backends. */
static void check_softmax(const gc_tensor *x, double spread, const char *what) {
    gc_tensor *x_gpu = gc_test_to_cuda(x);
    int64_t cols = x->shape[x->ndim - 1];
    for (int take_log = 0; take_log <= 1; take_log++) {
        char label[160];
        gc_tensor *want = take_log ? gc_log_softmax(x) : gc_softmax(x);
        gc_tensor *got = take_log ? gc_log_softmax(x_gpu) : gc_softmax(x_gpu);
        REQUIRE(want && got);
        gc_test_tolerance_pair t = gc_test_softmax_tolerance(cols, x->dtype, spread, take_log);
        snprintf(label, sizeof label, "%s %s", take_log ? "log_softmax" : "softmax", what);
        gc_test_expect_close(want, got, t.atol, t.rtol, label);
        gc_tensor_release(want);
        gc_tensor_release(got);
    }
    gc_tensor_release(x_gpu);
}

/* Random rows of every floating dtype and length, in [-1, 1) and in [-1000, 1000), where
 * exp(x) without the max shifted out overflows (e^1000 is past f64's range too). */
static void test_softmax_random(void) {
    const double ranges[] = {1, 1000};
    uint64_t seed = 1;
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        for (int c = 0; c < COUNT(col_sizes); c++) {
            for (int r = 0; r < COUNT(ranges); r++) {
                char what[96];
                gc_tensor *x = uniform_rows(col_sizes[c], float_dtypes[d], -ranges[r], ranges[r], seed++);
                snprintf(what, sizeof what, "%s [2, 3, %lld] in [-%g, %g)", gc_dtype_name(float_dtypes[d]),
                         (long long)col_sizes[c], ranges[r], ranges[r]);
                check_softmax(x, 2 * ranges[r], what);
                gc_tensor_release(x);
            }
        }
    }
}

/* gc_softmax_scaled (attention's softmax of scale x + bias) against the CPU's, for every bias
 * layout, every floating dtype, rows of 1 to 4097 keys. The logits z = scale x + bias
 * (|z| <= zmax) differ by at most zmax (step + 4u): the CPU stages them in the stored dtype
 * (a multiply and an add, at most half a step each: one step of f16 is 2^-10, ~2e-3 at
 * |z| = 3.5, as seen on an H200), CUDA in its accumulator (two roundings of u). That moves
 * a probability by at most twice as much relatively, added to the softmax's own bound over
 * a spread of 2 zmax. */
static void test_softmax_scaled(void) {
    const double scale = 0.375, zmax = 4 * 0.375 + 2; /* x in [-4, 4), bias in [-2, 2) */
    const int64_t cols_sizes[] = {1, 33, 4097};
    uint64_t seed = 100;
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        gc_dtype dtype = float_dtypes[d];
        for (int c = 0; c < COUNT(cols_sizes); c++) {
            int64_t cols = cols_sizes[c];
            const int64_t bias_shapes[3][4] = {{2, 1, 1, cols}, {1, 1, 3, cols}, {2, 1, 3, cols}};
            gc_tensor *x = gc_uniform(GC_SHAPE(2, 4, 3, cols), dtype, gc_cpu(), -4, 4, seed++, 0);
            REQUIRE(x);
            gc_tensor *x_gpu = gc_test_to_cuda(x);
            for (int layout = -1; layout < 3; layout++) {
                gc_tensor *bias =
                    layout < 0 ? NULL : gc_uniform(4, bias_shapes[layout], dtype, gc_cpu(), -2, 2, seed++, 0);
                gc_tensor *bias_gpu = bias ? gc_test_to_cuda(bias) : NULL;
                gc_tensor *want = gc_softmax_scaled(x, scale, bias), *got = gc_softmax_scaled(x_gpu, scale, bias_gpu);
                REQUIRE(want && got);
                gc_test_tolerance_pair t = gc_test_softmax_tolerance(cols, dtype, 2 * zmax, false);
                char what[96];
                snprintf(what, sizeof what, "softmax_scaled %s, %lld keys, bias layout %d", gc_dtype_name(dtype),
                         (long long)cols, layout);
                double logits = zmax * (gc_test_step_rtol(dtype) + 4 * gc_test_roundoff(dtype));
                gc_test_expect_close(want, got, t.atol, t.rtol + 2 * logits, what);
                RELEASE(want, got, bias, bias_gpu);
            }
            RELEASE(x, x_gpu);
        }
    }
}

/* x [3, 5]: row 0 all -inf and row 1 holding a NaN give rows of NaN (-inf - -inf, and
 * NaN, reach every element through the max or the sum); row 2 = 1 2 3 4 5 is ordinary:
 * softmax e^(i - 5) / sum_j e^(j - 5), log-softmax (i - 5) - log sum_j e^(j - 5). */
static void test_softmax_nonfinite(void) {
    const double values[15] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 1, 2, NAN, 4, 5,
                               1, 2, 3, 4, 5};
    double sum = 0;
    for (int j = 1; j <= 5; j++) sum += exp(j - 5.0);
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        gc_dtype dtype = float_dtypes[d];
        gc_tensor *x = gc_test_from_doubles(values, 2, (const int64_t[]){3, 5}, dtype);
        gc_tensor *x_gpu = gc_test_to_cuda(x);
        for (int take_log = 0; take_log <= 1; take_log++) {
            const char *op = take_log ? "log_softmax" : "softmax";
            gc_tensor *y = take_log ? gc_log_softmax(x_gpu) : gc_softmax(x_gpu);
            REQUIRE(y);
            double *got = gc_test_host_values(y);
            for (int i = 0; i < 10; i++)
                CHECK_MSG(isnan(got[i]), "%s %s element %d: %g, want nan", op, gc_dtype_name(dtype), i,
                          got[i]);
            gc_test_tolerance_pair t = gc_test_softmax_tolerance(5, dtype, 4, take_log);
            for (int i = 1; i <= 5; i++) {
                double want = take_log ? (i - 5.0) - log(sum) : exp(i - 5.0) / sum;
                CHECK_MSG(fabs(got[9 + i] - want) <= t.atol + t.rtol * fabs(want),
                          "%s %s element %d: %.9g, want %.9g", op, gc_dtype_name(dtype), 9 + i, got[9 + i],
                          want);
            }
            free(got);
            gc_tensor_release(y);
        }
        gc_tensor_release(x);
        gc_tensor_release(x_gpu);
    }
}

/* layernorm of x (on the CPU) with gamma and beta (or NULL) on both backends: y and the
 * saved mean and rstd, and y again without asking for them. */
static void check_layernorm(const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *beta,
                            const char *what) {
    const double eps = 1e-5;
    char label[160];
    gc_tensor *x_gpu = gc_test_to_cuda(x);
    gc_tensor *gamma_gpu = gamma ? gc_test_to_cuda(gamma) : NULL;
    gc_tensor *beta_gpu = beta ? gc_test_to_cuda(beta) : NULL;
    gc_tensor *want_mean = NULL, *want_rstd = NULL, *got_mean = NULL, *got_rstd = NULL;
    gc_tensor *want = gc_layernorm(x, gamma, beta, eps, &want_mean, &want_rstd);
    gc_tensor *got = gc_layernorm(x_gpu, gamma_gpu, beta_gpu, eps, &got_mean, &got_rstd);
    gc_tensor *got_alone = gc_layernorm(x_gpu, gamma_gpu, beta_gpu, eps, NULL, NULL);
    REQUIRE(want && got && got_alone && want_mean && want_rstd && got_mean && got_rstd);

    gc_test_layernorm_tolerance t = gc_test_layernorm_tolerances(x, gamma, beta, want_rstd);
    snprintf(label, sizeof label, "layernorm %s", what);
    gc_test_expect_close(want, got, t.y.atol, t.y.rtol, label);
    gc_test_expect_close(want, got_alone, t.y.atol, t.y.rtol, label);
    snprintf(label, sizeof label, "layernorm mean %s", what);
    gc_test_expect_close(want_mean, got_mean, t.mean.atol, t.mean.rtol, label);
    snprintf(label, sizeof label, "layernorm rstd %s", what);
    gc_test_expect_close(want_rstd, got_rstd, t.rstd.atol, t.rstd.rtol, label);

    gc_tensor *release[] = {x_gpu, gamma_gpu, beta_gpu, want, got, got_alone,
                            want_mean, want_rstd, got_mean, got_rstd};
    for (int i = 0; i < COUNT(release); i++) gc_tensor_release(release[i]);
}

/* Every floating dtype and length, with and without gamma and beta, for rows in [-1, 1)
 * and in [99, 101), whose variance a one-pass E[x^2] - E[x]^2 in float would lose. */
static void test_layernorm_random(void) {
    const double offsets[] = {0, 100};
    uint64_t seed = 1000;
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        for (int c = 0; c < COUNT(col_sizes); c++) {
            gc_dtype dtype = float_dtypes[d];
            int64_t cols = col_sizes[c];
            gc_tensor *gamma = gc_test_random(1, &cols, dtype, seed++);
            gc_tensor *beta = gc_test_random(1, &cols, dtype, seed++);
            for (int o = 0; o < COUNT(offsets); o++) {
                gc_tensor *x = uniform_rows(cols, dtype, offsets[o] - 1, offsets[o] + 1, seed++);
                for (int affine = 0; affine < 4; affine++) {
                    char what[128];
                    snprintf(what, sizeof what, "%s [2, 3, %lld] in [%g, %g)%s%s", gc_dtype_name(dtype),
                             (long long)cols, offsets[o] - 1, offsets[o] + 1, affine & 1 ? " gamma" : "",
                             affine & 2 ? " beta" : "");
                    check_layernorm(x, affine & 1 ? gamma : NULL, affine & 2 ? beta : NULL, what);
                }
                gc_tensor_release(x);
            }
            gc_tensor_release(gamma);
            gc_tensor_release(beta);
        }
    }
}

int main(void) {
    gc_test_require_cuda();
    GC_TEST_CASE(test_softmax_random);
    GC_TEST_CASE(test_softmax_nonfinite);
    GC_TEST_CASE(test_softmax_scaled);
    GC_TEST_CASE(test_layernorm_random);
    return gc_test_result();
}
