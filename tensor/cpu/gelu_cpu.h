/* The f32 gelu (erf form) and its derivative on erf_cpu.h's erf and exp, written once for
 * the portable loop (elementwise_cpu.c, the SSE2 baseline) and the AVX2 and AVX-512 ones
 * (gelu_simd.c, two and four times as wide), chosen at run time. The same C with the same
 * operations in each, and no contraction into FMA (ISO C for the library, -ffp-contract=off
 * for the SIMD files), so all give the same bits: tests/test_erf.c compares them over its
 * whole sweep. */
#ifndef GC_TENSOR_GELU_CPU_H
#define GC_TENSOR_GELU_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu_isa.h"
#include "erf_cpu.h"

#define GC_SQRT_HALF 0.70710678118654752440    /* 1 / sqrt(2) */
#define GC_INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi), the normal density at 0 */

/* x Phi(x) */
static inline float gc_gelu_erf_f32(float x) { return 0.5f * x * (1.0f + gc_erf_f32(x * (float)GC_SQRT_HALF)); }

/* Phi(x) + x phi(x) */
static inline float gc_gelu_erf_grad_f32(float x) {
    return 0.5f * (1.0f + gc_erf_f32(x * (float)GC_SQRT_HALF)) +
           x * (float)GC_INV_SQRT_2PI * gc_exp_nonpositive_f32(-0.5f * x * x);
}

/* y[i] = gelu(x[i]), or its derivative when `derivative`, for i < n: two plain loops that
 * the compiler vectorises for the instruction set the including file is built for. */
static inline void gc_gelu_erf_loop(bool derivative, const float *restrict x, float *restrict y, size_t n) {
    if (derivative)
        for (size_t i = 0; i < n; i++) y[i] = gc_gelu_erf_grad_f32(x[i]);
    else
        for (size_t i = 0; i < n; i++) y[i] = gc_gelu_erf_f32(x[i]);
}

/* dx[i] = g[i] * gelu'(x[i]) for i < n: the derivative's loop with the backward's product
 * in it, the same bits as the derivative rounded to float and then multiplied. */
static inline void gc_gelu_erf_grad_loop(const float *restrict x, const float *restrict g, float *restrict dx,
                                         size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = g[i] * gc_gelu_erf_grad_f32(x[i]);
}

/* gelu_simd.c: the same loops built with -mavx2 and with -mavx512f (call each only where
 * the CPU has its set). */
void gc_gelu_erf_loop_avx2(bool derivative, const float *x, float *y, size_t n);
void gc_gelu_erf_grad_loop_avx2(const float *x, const float *g, float *dx, size_t n);
void gc_gelu_erf_loop_avx512(bool derivative, const float *x, float *y, size_t n);
void gc_gelu_erf_grad_loop_avx512(const float *x, const float *g, float *dx, size_t n);

#endif
