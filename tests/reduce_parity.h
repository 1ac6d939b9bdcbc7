/* Helpers of the tests that compare the CUDA row reductions with the CPU reference
 * (test_reduce_cuda.c, test_norm_cuda.c): hand-built inputs and the error bounds that
 * the tolerances are made of.
 *
 * The CPU computes in double and rounds once to the stored type; the CUDA kernels compute
 * in float (double for f64) and add a row's terms in another order. The bounds below
 * are first-order worst cases, not estimates, so a correct kernel never fails them. */
#ifndef GC_TESTS_REDUCE_PARITY_H
#define GC_TESTS_REDUCE_PARITY_H

#include <math.h>
#include <stdlib.h>

#include "check.h"

/* Unit roundoff of the type the CUDA kernels compute in: double for f64, float for the
 * rest (f16 and bf16 included). */
static inline double gc_test_accum_roundoff(gc_dtype dtype) {
    return dtype == GC_F64 ? 0x1p-53 : 0x1p-24;
}

/* A bound on |CUDA sum - CPU sum| of n terms x_i, relative to sum |x_i|. A sum in which
 * every term goes through at most k additions of unit roundoff u is within k u sum |x_i|
 * of the exact sum (to first order; Higham, Accuracy and Stability of Numerical
 * Algorithms, 2nd ed., section 4.2). The CUDA kernels spread a row over T >= min(n, 1024)
 * threads that each add at most ceil(n / T) terms, then combine the threads in a tree of
 * depth <= 10 (tensor/cuda/reduce_common.cuh); ceil(n / 256) + 16 covers that with room
 * to spare. The CPU adds in double, k <= n in any order. i32 sums are exact (int64). */
static inline double gc_test_sum_error(int64_t n, gc_dtype dtype) {
    if (dtype == GC_I32) return 0;
    return (ceil((double)n / 256) + 16) * gc_test_accum_roundoff(dtype) + (double)n * 0x1p-53;
}

/* One step of the stored type relative to a value, 2^(1 - p) for p significand bits: two
 * results that are the roundings to the stored type of reals within `atol` of each other
 * differ by at most atol plus this much of their magnitude. */
static inline double gc_test_step_rtol(gc_dtype dtype) {
    switch (dtype) {
    case GC_F16: return 0x1p-10;
    case GC_BF16: return 0x1p-7;
    case GC_F32: return 0x1p-23;
    case GC_F64: return 0x1p-52;
    default: return 0; /* i32 */
    }
}

/* Below the smallest normal number of the stored type, rounding errors are absolute:
 * the f32 (and bf16) and f64 ones are far below this; f16 rounds to steps of 2^-24. */
static inline double gc_test_tiny(gc_dtype dtype) {
    switch (dtype) {
    case GC_F16: return 0x1p-24;
    case GC_F64: return 0x1p-1022;
    default: return 0x1p-126;
    }
}

/* The elements of x as doubles, in a buffer the caller frees. */
static inline double *gc_test_host_values(const gc_tensor *x) {
    int64_t n = gc_numel(x);
    double *values = malloc(sizeof(double) * (size_t)(n ? n : 1));
    REQUIRE(values);
    gc_to_host_f64(x, values);
    return values;
}

/* The largest sum |x_i| over the rows of x (rows along the last dim). */
static inline double gc_test_max_row_abs_sum(const gc_tensor *x) {
    int64_t n = gc_numel(x), cols = x->ndim ? x->shape[x->ndim - 1] : 1;
    double *values = gc_test_host_values(x);
    double largest = 0;
    for (int64_t start = 0; start < n; start += cols) {
        double sum = 0;
        for (int64_t i = start; i < start + cols; i++) sum += fabs(values[i]);
        if (sum > largest) largest = sum;
    }
    free(values);
    return largest;
}

/* The largest |element| of x, or `empty` when x is NULL (an absent gamma or beta). */
static inline double gc_test_max_abs(const gc_tensor *x, double empty) {
    return x ? gc_test_largest_abs(x) : empty;
}

/* A CPU tensor of `dtype` holding `values`, which the tests choose representable in it
 * (f16 and bf16 go through f32; i32 values are integers). */
static inline gc_tensor *gc_test_from_doubles(const double *values, int ndim, const int64_t *shape,
                                              gc_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    char *raw = malloc(gc_dtype_size(dtype) * (size_t)(n ? n : 1));
    REQUIRE(raw);
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case GC_F32: ((float *)raw)[i] = (float)values[i]; break;
        case GC_F16: ((uint16_t *)raw)[i] = gc_f32_to_f16((float)values[i]); break;
        case GC_BF16: ((uint16_t *)raw)[i] = gc_f32_to_bf16((float)values[i]); break;
        case GC_I32: ((int32_t *)raw)[i] = (int32_t)values[i]; break;
        case GC_F64: ((double *)raw)[i] = values[i]; break;
        default: REQUIRE(!"a known dtype");
        }
    }
    gc_tensor *t = gc_from_host(raw, ndim, shape, dtype, gc_cpu());
    REQUIRE(t);
    free(raw);
    return t;
}

/* A copy of x on cuda:0. */
static inline gc_tensor *gc_test_to_cuda(const gc_tensor *x) {
    gc_tensor *copy = gc_to_device(x, gc_cuda(0));
    REQUIRE(copy);
    return copy;
}

#endif
