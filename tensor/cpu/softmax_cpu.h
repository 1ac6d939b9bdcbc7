/* The f32 row of gc_softmax_scaled (reduce_cpu.c) -- attention's softmax over each row of the
 * [B, H, T, T] scores -- written once for the portable build (reduce_cpu.c, the SSE2
 * baseline) and the AVX2 one (softmax_avx2.c, twice as wide), chosen at run time. The same C
 * with the same operations and no contraction into FMA (ISO C for the library,
 * -ffp-contract=off for the SIMD files), so the two give the same bits: the exp is
 * erf_cpu.h's, branch-free, and the sum is rows_cpu.h's lanes, each lane one chain of
 * additions in either build (tests/test_softmax_scaled.c compares them). */
#ifndef GC_TENSOR_SOFTMAX_CPU_H
#define GC_TENSOR_SOFTMAX_CPU_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "cpu_isa.h"
#include "erf_cpu.h"
#include "rows_cpu.h"

/* y [cols] = softmax(scale x + bias) of the row x [cols], bias [cols] or NULL. When `staged`
 * (scale != 1 or a bias), the scaled, biased row is first written to y, rounded as a
 * multiply and an add in float round it (the ops it replaces), and the softmax runs over y
 * in place. Then x - max and its exp in float, the exps kept in y, their sum in double
 * lanes, and each exp times the sum's reciprocal in double (a multiply where a divide would
 * take most of the time; in double, the reciprocal's rounding is far below the float
 * result's), rounded once. The max skips a nan, which then reaches every output through its
 * exp and the sum; a max of +inf or -inf gives inf - inf = nan the same way. */
static inline void gc_softmax_scaled_row_f32(const float *x, const float *bias, float scale, bool staged, float *y,
                                             size_t cols) {
    if (staged) {
        for (size_t j = 0; j < cols; j++) {
            float scaled = x[j] * scale;
            y[j] = bias ? scaled + bias[j] : scaled;
        }
        x = y;
    }
    float max = -INFINITY;
    for (size_t j = 0; j < cols; j++) max = x[j] > max ? x[j] : max;
    for (size_t j = 0; j < cols; j++) y[j] = gc_exp_nonpositive_f32(x[j] - max);
    double inverse_sum = 1.0 / gc_sum_span(y, GC_F32, 0, cols);
    for (size_t j = 0; j < cols; j++) y[j] = (float)((double)y[j] * inverse_sum);
}

/* softmax_avx2.c: the same row built with -mavx2 (call only where the CPU has AVX2). */
void gc_softmax_scaled_row_f32_avx2(const float *x, const float *bias, float scale, bool staged, float *y,
                                    size_t cols);

#endif
