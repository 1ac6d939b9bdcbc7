/* The CUDA softmax, log-softmax and layernorm against the CPU reference and against
 * hand-computed values. Suite cuda: skipped where there is no GPU. The tolerances are
 * derived below from the bounds of reduce_parity.h. */
#include <math.h>

#include "check.h"
#include "reduce_parity.h"

static const gc_dtype float_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
static const int64_t col_sizes[] = {1, 7, 33, 1000, 4097};
#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

/* got within atol + rtol |want| */
typedef struct tolerance {
    double atol, rtol;
} tolerance;

/* A rounding by either backend: the CUDA kernels' (float, or double for f64) and the
 * CPU's (double). */
static double roundoff(gc_dtype dtype) { return gc_test_accum_roundoff(dtype) + 0x1p-53; }

/* x [2, 3, cols] uniform in [lo, hi) on the CPU. */
static gc_tensor *uniform_rows(int64_t cols, gc_dtype dtype, double lo, double hi, uint64_t seed) {
    gc_tensor *x = gc_uniform(GC_SHAPE(2, 3, cols), dtype, gc_cpu(), lo, hi, seed, 0);
    REQUIRE(x);
    return x;
}

/* Softmax or log-softmax of rows of `cols` elements within `spread` of each other. With
 * d = x - max (so -spread <= d <= 0) and s the summation bound:
 *  - the kernel's x - max is off by u|d|, so exp(d) by u|d| relatively, and exp adds 2 ulps
 *    (4u): each term is within (spread + 4)u, so their positive sum within
 *    s + (spread + 4)u = e, relatively;
 *  - softmax: term / sum rounds once more: rtol (spread + 4)u + e + u;
 *  - log-softmax y = d - log(sum), where |y| = |d| + log(sum): the errors of d (u|d|), of
 *    log (1 ulp, 2u log(sum)) and of the subtraction (u|y|) stay within 3u|y|, and the
 *    sum's relative error e becomes an absolute one: atol e, rtol 3u.
 * The CPU's f32 softmax, the reference, takes x - max and exp in float too (exp within
 * 1 ulp, the sum in double, one rounding at the end): its terms are within (spread + 2)u,
 * its sum as well, and its result within (2 spread + 5)u, added to the bound.
 * Plus one step of the stored type, and the absolute errors below its normal range. */
static tolerance softmax_tolerance(int64_t cols, gc_dtype dtype, double spread, bool log_softmax) {
    double u = roundoff(dtype);
    double e = gc_test_sum_error(cols, dtype) + (spread + 4) * u;
    tolerance t = log_softmax ? (tolerance){e, 3 * u} : (tolerance){0, (spread + 5) * u + e};
    if (dtype == GC_F32 && !log_softmax) t.rtol += (2 * spread + 5) * u;
    t.atol += gc_test_tiny(dtype);
    t.rtol += gc_test_step_rtol(dtype);
    return t;
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
        tolerance t = softmax_tolerance(cols, x->dtype, spread, take_log);
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
            tolerance t = softmax_tolerance(5, dtype, 4, take_log);
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

/* Layernorm of rows of `cols` elements, with s the summation bound, u a rounding, A the
 * largest mean |x| of a row, R the largest rstd, G = max |gamma| (1 without) and
 * B = max |beta| (0 without):
 *  - mean: the sum's error divided by cols, and the division: e = (s + u) A;
 *  - var: each squared deviation is within 3u (subtraction, square), all are positive,
 *    the sum adds s and the division u; the mean's error adds e^2 relatively to
 *    var + eps >= 1 / R^2: v = s + 4u + (e R)^2;
 *  - rstd = 1 / sqrt(var + eps): eps's rounding, the addition, sqrt and the division add
 *    4u (sqrt halves var's error; not counted on): r = v + 4u;
 *  - y = ((x - mean) rstd) gamma + beta: the mean's error gives e R G; the subtraction,
 *    rstd and the product with gamma give (r + 3u) |z gamma| <= (r + 3u)(|y| + B), z the
 *    normalised x; adding beta rounds by u|y|: atol e R G + (r + 3u) B, rtol r + 4u.
 * Plus one step of the stored type (f32 for mean and rstd) and the tiny absolute. */
typedef struct layernorm_tolerance {
    tolerance y, mean, rstd;
} layernorm_tolerance;

static layernorm_tolerance layernorm_tolerances(const gc_tensor *x, const gc_tensor *gamma,
                                                const gc_tensor *beta, const gc_tensor *cpu_rstd) {
    int64_t cols = x->shape[x->ndim - 1];
    double u = roundoff(x->dtype), s = gc_test_sum_error(cols, x->dtype);
    double a = gc_test_max_row_abs_sum(x) / (double)cols, big_r = gc_test_max_abs(cpu_rstd, 0);
    double g = gc_test_max_abs(gamma, 1), b = gc_test_max_abs(beta, 0);
    double e = (s + u) * a, v = s + 4 * u + (e * big_r) * (e * big_r), r = v + 4 * u;
    double step = gc_test_step_rtol(x->dtype), tiny = gc_test_tiny(x->dtype);
    return (layernorm_tolerance){
        .y = {e * big_r * g + (r + 3 * u) * b + tiny, r + 4 * u + step},
        .mean = {e + gc_test_tiny(GC_F32), 0x1p-23},
        .rstd = {gc_test_tiny(GC_F32), r + 0x1p-23},
    };
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

    layernorm_tolerance t = layernorm_tolerances(x, gamma, beta, want_rstd);
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
    GC_TEST_CASE(test_layernorm_random);
    return gc_test_result();
}
