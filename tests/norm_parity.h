/* The tolerances of the CUDA softmax, log-softmax and layernorm against the CPU reference
 * (test_norm_cuda.c, test_large_cuda.c), derived from the bounds of reduce_parity.h. */
#ifndef GC_TESTS_NORM_PARITY_H
#define GC_TESTS_NORM_PARITY_H

#include "reduce_parity.h"

/* got within atol + rtol |want| */
typedef struct gc_test_tolerance_pair {
    double atol, rtol;
} gc_test_tolerance_pair;

/* A rounding by either backend: the CUDA kernels' (float, or double for f64) and the
 * CPU's (double). */
static inline double gc_test_roundoff(gc_dtype dtype) { return gc_test_accum_roundoff(dtype) + 0x1p-53; }

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
static inline gc_test_tolerance_pair gc_test_softmax_tolerance(int64_t cols, gc_dtype dtype, double spread, bool log_softmax) {
    double u = gc_test_roundoff(dtype);
    double e = gc_test_sum_error(cols, dtype) + (spread + 4) * u;
    gc_test_tolerance_pair t = log_softmax ? (gc_test_tolerance_pair){e, 3 * u} : (gc_test_tolerance_pair){0, (spread + 5) * u + e};
    if (dtype == GC_F32 && !log_softmax) t.rtol += (2 * spread + 5) * u;
    t.atol += gc_test_tiny(dtype);
    t.rtol += gc_test_step_rtol(dtype);
    return t;
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
typedef struct gc_test_layernorm_tolerance {
    gc_test_tolerance_pair y, mean, rstd;
} gc_test_layernorm_tolerance;

static inline gc_test_layernorm_tolerance gc_test_layernorm_tolerances(const gc_tensor *x, const gc_tensor *gamma,
                                                                     const gc_tensor *beta, const gc_tensor *cpu_rstd) {
    int64_t cols = x->shape[x->ndim - 1];
    double u = gc_test_roundoff(x->dtype), s = gc_test_sum_error(cols, x->dtype);
    double a = gc_test_max_row_abs_sum(x) / (double)cols, big_r = gc_test_max_abs(cpu_rstd, 0);
    double g = gc_test_max_abs(gamma, 1), b = gc_test_max_abs(beta, 0);
    double e = (s + u) * a, v = s + 4 * u + (e * big_r) * (e * big_r), r = v + 4 * u;
    double step = gc_test_step_rtol(x->dtype), tiny = gc_test_tiny(x->dtype);
    return (gc_test_layernorm_tolerance){
        .y = {e * big_r * g + (r + 3 * u) * b + tiny, r + 4 * u + step},
        .mean = {e + gc_test_tiny(GC_F32), 0x1p-23},
        .rstd = {gc_test_tiny(GC_F32), r + 0x1p-23},
    };
}

#endif
