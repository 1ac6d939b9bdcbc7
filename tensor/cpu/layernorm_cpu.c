/* Layer normalisation on the CPU, per row of x [rows, cols]: the mean and the biased
 * variance in double by two passes (the one-pass E[x^2] - E[x]^2 cancels badly on rows
 * whose mean is large against their spread), then
 * y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), computed in double
 * and rounded once into x's dtype. mean and rstd [rows], when asked for, are saved as
 * f32 for a backward pass. */
#include <math.h>

#include "kernels_cpu.h"
#include "rows_cpu.h"
#include "thread_pool.h"

/* sum over the row x[first .. first + cols) of (x - mean)^2 */
static double squared_deviation(const void *x, gc_dtype dtype, size_t first, size_t cols, double mean) {
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
static void row_statistics(const void *x, gc_dtype dtype, size_t first, size_t cols, double eps, double *mean,
                           double *rstd) {
    *mean = gc_sum_span(x, dtype, first, cols) / (double)cols;
    double variance = squared_deviation(x, dtype, first, cols, *mean) / (double)cols;
    *rstd = 1.0 / sqrt(variance + eps);
}

/* out = param[start .. start + len), or `absent` throughout when param is NULL (no gamma
 * means 1, no beta 0). */
static void load_param(const void *param, gc_dtype dtype, size_t start, size_t len, double absent, double *out) {
    if (param) {
        gc_load_span(param, dtype, start, len, out);
        return;
    }
    for (size_t j = 0; j < len; j++) out[j] = absent;
}

/* One row of y from the row of x at `first`; gamma, beta [cols] or NULL. */
static void normalize_row(const void *x, const void *gamma, const void *beta, void *y, size_t first,
                          size_t cols, double mean, double rstd, gc_dtype dtype) {
    double value[GC_CPU_CHUNK], scale[GC_CPU_CHUNK], shift[GC_CPU_CHUNK];
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        gc_load_span(x, dtype, first + start, len, value);
        load_param(gamma, dtype, start, len, 1.0, scale);
        load_param(beta, dtype, start, len, 0.0, shift);
        for (size_t j = 0; j < len; j++) value[j] = (value[j] - mean) * rstd * scale[j] + shift[j];
        gc_store_span(y, dtype, first + start, len, value);
    }
}

/* normalize_row for f32 rows, straight from and to the floats in one loop: the same double
 * arithmetic, so the same bits, without the chunk conversions. */
static void normalize_row_f32(const float *x, const float *gamma, const float *beta, float *y, size_t cols,
                              double mean, double rstd) {
    for (size_t j = 0; j < cols; j++) {
        double scale = gamma ? gamma[j] : 1.0, shift = beta ? beta[j] : 0.0;
        y[j] = (float)(((double)x[j] - mean) * rstd * scale + shift);
    }
}

typedef struct layernorm_job {
    const void *x, *gamma, *beta;
    void *y;
    float *mean, *rstd;
    size_t cols;
    double eps;
    gc_dtype dtype;
} layernorm_job;

/* Rows [begin, end): the threads split the rows. */
static void layernorm_rows(void *arg, int64_t begin, int64_t end) {
    const layernorm_job *job = arg;
    size_t cols = job->cols;
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * cols;
        double row_mean, row_rstd;
        row_statistics(job->x, job->dtype, first, cols, job->eps, &row_mean, &row_rstd);
        if (job->dtype == GC_F32)
            normalize_row_f32((const float *)job->x + first, job->gamma, job->beta, (float *)job->y + first, cols,
                              row_mean, row_rstd);
        else normalize_row(job->x, job->gamma, job->beta, job->y, first, cols, row_mean, row_rstd, job->dtype);
        if (job->mean) job->mean[row] = (float)row_mean;
        if (job->rstd) job->rstd[row] = (float)row_rstd;
    }
}

void gc_cpu_layernorm(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                      float *rstd, size_t rows, size_t cols, double eps, gc_dtype dtype) {
    layernorm_job job = {x, gamma, beta, y, mean, rstd, cols, eps, dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(4 * cols + 1) + 1, layernorm_rows, &job);
}

/* --- the backward pass: with xhat = (x - mean) rstd and dxhat = g gamma,
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),
 * per row in double from the statistics recomputed as the forward computes them, rounded
 * once; g_xhat = g xhat, the terms of gamma's gradient (the caller sums them over rows). */

typedef struct layernorm_grad_job {
    const void *x, *gamma, *g;
    void *dx, *g_xhat;
    size_t cols;
    double eps;
    gc_dtype dtype;
} layernorm_grad_job;

/* xhat and dxhat of the chunk at `start` of the row at `first`; g xhat stored into g_xhat
 * when store_g_xhat (once per element: in the first of the two passes over the row). */
static void normalised_chunk(const layernorm_grad_job *job, size_t first, size_t start, size_t len, double mean,
                             double rstd, bool store_g_xhat, double *xhat, double *dxhat) {
    double scale[GC_CPU_CHUNK], g_xhat[GC_CPU_CHUNK];
    gc_load_span(job->x, job->dtype, first + start, len, xhat);
    gc_load_span(job->g, job->dtype, first + start, len, dxhat); /* g, until multiplied by gamma */
    load_param(job->gamma, job->dtype, start, len, 1.0, scale);
    for (size_t j = 0; j < len; j++) xhat[j] = (xhat[j] - mean) * rstd;
    if (store_g_xhat) {
        for (size_t j = 0; j < len; j++) g_xhat[j] = dxhat[j] * xhat[j];
        gc_store_span(job->g_xhat, job->dtype, first + start, len, g_xhat);
    }
    for (size_t j = 0; j < len; j++) dxhat[j] *= scale[j];
}

/* One row's backward, any dtype, a chunk at a time. */
static void layernorm_grad_row(const layernorm_grad_job *job, size_t first, double mean, double rstd) {
    size_t cols = job->cols;
    double xhat[GC_CPU_CHUNK], dxhat[GC_CPU_CHUNK];
    double dxhat_lanes[GC_SUM_LANES] = {0}, product_lanes[GC_SUM_LANES] = {0};
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        normalised_chunk(job, first, start, len, mean, rstd, job->g_xhat != NULL, xhat, dxhat);
        gc_add_to_lanes(dxhat, len, dxhat_lanes);
        for (size_t j = 0; j < len; j++) xhat[j] *= dxhat[j]; /* xhat is recomputed below */
        gc_add_to_lanes(xhat, len, product_lanes);
    }
    if (!job->dx) return;
    double mean_dxhat = gc_lanes_total(dxhat_lanes) / (double)cols;
    double mean_dxhat_xhat = gc_lanes_total(product_lanes) / (double)cols;
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        normalised_chunk(job, first, start, len, mean, rstd, false, xhat, dxhat);
        for (size_t j = 0; j < len; j++) dxhat[j] = rstd * (dxhat[j] - mean_dxhat - xhat[j] * mean_dxhat_xhat);
        gc_store_span(job->dx, job->dtype, first + start, len, dxhat);
    }
}

/* layernorm_grad_row for an f32 row, each pass one loop over the floats: the same double
 * arithmetic in the same order (the same bits) without the chunk conversions and the
 * passes over them, which took most of the generic row's time. */
static void layernorm_grad_row_f32(const layernorm_grad_job *job, size_t first, double mean, double rstd) {
    size_t cols = job->cols;
    const float *x = (const float *)job->x + first, *g = (const float *)job->g + first, *gamma = job->gamma;
    float *g_xhat = job->g_xhat ? (float *)job->g_xhat + first : NULL;
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
    if (!job->dx) return;
    double mean_dxhat = gc_lanes_total(dxhat_lanes) / (double)cols;
    double mean_dxhat_xhat = gc_lanes_total(product_lanes) / (double)cols;
    float *dx = (float *)job->dx + first;
    for (size_t i = 0; i < cols; i++) {
        double xhat = ((double)x[i] - mean) * rstd, scale = gamma ? gamma[i] : 1.0;
        dx[i] = (float)(rstd * ((double)g[i] * scale - mean_dxhat - xhat * mean_dxhat_xhat));
    }
}

static void layernorm_grad_rows(void *arg, int64_t begin, int64_t end) {
    const layernorm_grad_job *job = arg;
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * job->cols;
        double mean, rstd;
        row_statistics(job->x, job->dtype, first, job->cols, job->eps, &mean, &rstd);
        if (job->dtype == GC_F32) layernorm_grad_row_f32(job, first, mean, rstd);
        else layernorm_grad_row(job, first, mean, rstd);
    }
}

void gc_cpu_layernorm_backward(const void *x, const void *gamma, const void *g, void *dx, void *g_xhat, size_t rows,
                               size_t cols, double eps, gc_dtype dtype) {
    layernorm_grad_job job = {x, gamma, g, dx, g_xhat, cols, eps, dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(8 * cols + 1) + 1, layernorm_grad_rows, &job);
}
