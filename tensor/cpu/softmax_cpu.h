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
#include "kernels_cpu.h" /* GC_SOFTMAX_COLUMNS */
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

/* The rows of `queries` queries at once, each stored down a column: x[t * stride + q] is
 * query q's value at key place t (t < places), y likewise (y may be x). Each query gets
 * gc_softmax_scaled_row_f32's operations in its order (element t in double lane t mod 4), so
 * the same bits; every pass runs along the queries, which the compiler vectorises. Attention
 * over a short text (a dozen keys) row by row spent most of each row in the vectors' scalar
 * tails and in waiting on the row's one chain of operations (max, exps, sum, reciprocal).
 * The queries are taken GC_SOFTMAX_COLUMNS at a time, their maxima and sums on the stack. */
static inline void gc_softmax_scaled_columns_f32(const float *x, const float *bias, float scale, bool staged,
                                                 float *y, size_t places, size_t stride, size_t queries) {
    for (size_t first = 0; first < queries; first += GC_SOFTMAX_COLUMNS) {
        size_t count = queries - first < GC_SOFTMAX_COLUMNS ? queries - first : GC_SOFTMAX_COLUMNS;
        const float *in = x + first;
        float *out = y + first;
        if (staged) {
            for (size_t t = 0; t < places; t++) {
                const float *row = in + t * stride;
                float *to = out + t * stride;
                if (bias)
                    for (size_t q = 0; q < count; q++) to[q] = row[q] * scale + bias[t];
                else
                    for (size_t q = 0; q < count; q++) to[q] = row[q] * scale;
            }
            in = out;
        }
        float max[GC_SOFTMAX_COLUMNS];
        for (size_t q = 0; q < count; q++) max[q] = -INFINITY;
        for (size_t t = 0; t < places; t++) {
            const float *row = in + t * stride;
            for (size_t q = 0; q < count; q++) max[q] = row[q] > max[q] ? row[q] : max[q];
        }
        double lanes[GC_SUM_LANES][GC_SOFTMAX_COLUMNS] = {{0}};
        for (size_t t = 0; t < places; t++) {
            const float *row = in + t * stride;
            float *to = out + t * stride;
            double *lane = lanes[t % GC_SUM_LANES];
            for (size_t q = 0; q < count; q++) {
                float e = gc_exp_nonpositive_f32(row[q] - max[q]);
                to[q] = e;
                lane[q] += e;
            }
        }
        double inverse_sum[GC_SOFTMAX_COLUMNS];
        for (size_t q = 0; q < count; q++) {
            double column[GC_SUM_LANES] = {lanes[0][q], lanes[1][q], lanes[2][q], lanes[3][q]};
            inverse_sum[q] = 1.0 / gc_lanes_total(column);
        }
        for (size_t t = 0; t < places; t++) {
            float *to = out + t * stride;
            for (size_t q = 0; q < count; q++) to[q] = (float)((double)to[q] * inverse_sum[q]);
        }
    }
}

/* softmax_avx2.c: the same row and columns built with -mavx2 (call only where the CPU has AVX2). */
void gc_softmax_scaled_row_f32_avx2(const float *x, const float *bias, float scale, bool staged, float *y,
                                    size_t cols);
void gc_softmax_scaled_columns_f32_avx2(const float *x, const float *bias, float scale, bool staged, float *y,
                                        size_t places, size_t stride, size_t queries);

#endif
