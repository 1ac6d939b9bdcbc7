/* The rows of layernorm and of its backward (layernorm_cpu.c has the arithmetic), the f32
 * ones -- the training step's -- written once for the portable build (layernorm_cpu.c, the
 * SSE2 baseline) and the AVX2 one (layernorm_avx2.c: four doubles per instruction where the
 * baseline has two), chosen at run time. The same C with the same operations and no
 * contraction into FMA (ISO C for the library, -ffp-contract=off for the SIMD files), so
 * the two give the same bits: every sum is rows_cpu.h's lanes, each lane one chain of
 * additions in either build (tests/test_norm.c compares them). */
#ifndef GC_TENSOR_LAYERNORM_CPU_H
#define GC_TENSOR_LAYERNORM_CPU_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "cpu_isa.h"
#include "rows_cpu.h"

/* sum over the row x[first .. first + cols) of (x - mean)^2 */
static inline double gc_squared_deviation(const void *x, gc_dtype dtype, size_t first, size_t cols, double mean) {
    double chunk[GC_CPU_CHUNK], lanes[GC_SUM_LANES] = {0};
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        gc_load_span(x, dtype, first + start, len, chunk);
        for (size_t j = 0; j < len; j++) chunk[j] = (chunk[j] - mean) * (chunk[j] - mean);
        gc_add_to_lanes(chunk, len, lanes);
    }
    return gc_lanes_total(lanes);
}

/* The mean of the row x[first .. first + cols) and 1 / sqrt(variance + eps), in double. */
static inline void gc_layernorm_statistics(const void *x, gc_dtype dtype, size_t first, size_t cols, double eps,
                                           double *mean, double *rstd) {
    *mean = gc_sum_span(x, dtype, first, cols) / (double)cols;
    double variance = gc_squared_deviation(x, dtype, first, cols, *mean) / (double)cols;
    *rstd = 1.0 / sqrt(variance + eps);
}

/* One f32 row y [cols] of x [cols] (gamma, beta [cols] or NULL), its mean and rstd returned:
 * the statistics, then y straight from and to the floats in one loop in double. */
static inline void gc_layernorm_row_f32(const float *x, const float *gamma, const float *beta, float *y, size_t cols,
                                        double eps, double *mean, double *rstd) {
    gc_layernorm_statistics(x, GC_F32, 0, cols, eps, mean, rstd);
    const double row_mean = *mean, row_rstd = *rstd;
    for (size_t j = 0; j < cols; j++) {
        double scale = gamma ? gamma[j] : 1.0, shift = beta ? beta[j] : 0.0;
        y[j] = (float)(((double)x[j] - row_mean) * row_rstd * scale + shift);
    }
}

/* One f32 row's backward from x, g [cols] (gamma [cols] or NULL): dx [cols] (or NULL) and
 * g_xhat [cols] (or NULL), each pass one loop over the floats in double, rounded once. */
static inline void gc_layernorm_grad_row_f32(const float *x, const float *gamma, const float *g, float *dx,
                                             float *g_xhat, size_t cols, double eps) {
    double mean, rstd;
    gc_layernorm_statistics(x, GC_F32, 0, cols, eps, &mean, &rstd);
    double dxhat[GC_CPU_CHUNK], product[GC_CPU_CHUNK];
    double dxhat_lanes[GC_SUM_LANES] = {0}, product_lanes[GC_SUM_LANES] = {0};
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        for (size_t j = 0; j < len; j++) {
            size_t i = start + j;
            double xhat = ((double)x[i] - mean) * rstd, scale = gamma ? gamma[i] : 1.0;
            if (g_xhat) g_xhat[i] = (float)((double)g[i] * xhat);
            dxhat[j] = (double)g[i] * scale;
            product[j] = xhat * dxhat[j];
        }
        gc_add_to_lanes(dxhat, len, dxhat_lanes);
        gc_add_to_lanes(product, len, product_lanes);
    }
    if (!dx) return;
    double mean_dxhat = gc_lanes_total(dxhat_lanes) / (double)cols;
    double mean_dxhat_xhat = gc_lanes_total(product_lanes) / (double)cols;
    for (size_t i = 0; i < cols; i++) {
        double xhat = ((double)x[i] - mean) * rstd, scale = gamma ? gamma[i] : 1.0;
        dx[i] = (float)(rstd * ((double)g[i] * scale - mean_dxhat - xhat * mean_dxhat_xhat));
    }
}

/* layernorm_avx2.c: the same rows built with -mavx2 (call only where the CPU has AVX2). */
void gc_layernorm_row_f32_avx2(const float *x, const float *gamma, const float *beta, float *y, size_t cols,
                               double eps, double *mean, double *rstd);
void gc_layernorm_grad_row_f32_avx2(const float *x, const float *gamma, const float *g, float *dx, float *g_xhat,
                                    size_t cols, double eps);

#endif
