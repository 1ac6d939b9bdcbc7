/* Layer normalisation on the CPU, per row of x [rows, cols]: the mean and the biased
 * variance in double by two passes (the one-pass E[x^2] - E[x]^2 cancels badly on rows
 * whose mean is large against their spread), then
 * y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), computed in double
 * and rounded once into x's dtype. mean and rstd [rows], when asked for, are saved as
 * f32 for a backward pass. The f32 rows, forward and backward, are layernorm_cpu.h's, built for
 * AVX2 too and chosen at run time. */
#include <math.h>

#include "kernels_cpu.h"
#include "layernorm_cpu.h"
#include "rows_cpu.h"
#include "thread_pool.h"

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

void gc_cpu_layernorm_row_f32_on(gc_cpu_isa isa, const float *x, const float *gamma, const float *beta, float *y,
                                 size_t cols, double eps, double *mean, double *rstd) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX2) {
        gc_layernorm_row_f32_avx2(x, gamma, beta, y, cols, eps, mean, rstd);
        return;
    }
#endif
    (void)isa;
    gc_layernorm_row_f32(x, gamma, beta, y, cols, eps, mean, rstd);
}

void gc_cpu_layernorm_grad_row_f32_on(gc_cpu_isa isa, const float *x, const float *gamma, const float *g, float *dx,
                                      float *g_xhat, size_t cols, double eps) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX2) {
        gc_layernorm_grad_row_f32_avx2(x, gamma, g, dx, g_xhat, cols, eps);
        return;
    }
#endif
    (void)isa;
    gc_layernorm_grad_row_f32(x, gamma, g, dx, g_xhat, cols, eps);
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
    gc_cpu_isa isa = gc_cpu_isa_selected();
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * cols;
        double row_mean, row_rstd;
        if (job->dtype == GC_F32) {
            gc_cpu_layernorm_row_f32_on(isa, (const float *)job->x + first, job->gamma, job->beta,
                                        (float *)job->y + first, cols, job->eps, &row_mean, &row_rstd);
        } else {
            gc_layernorm_statistics(job->x, job->dtype, first, cols, job->eps, &row_mean, &row_rstd);
            normalize_row(job->x, job->gamma, job->beta, job->y, first, cols, row_mean, row_rstd, job->dtype);
        }
        if (job->mean) job->mean[row] = (float)row_mean;
        if (job->rstd) job->rstd[row] = (float)row_rstd;
    }
}

void gc_cpu_layernorm(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                      float *rstd, size_t rows, size_t cols, double eps, gc_dtype dtype) {
    layernorm_job job = {x, gamma, beta, y, mean, rstd, cols, eps, dtype};
    /* A row costs about 2 ns an element (two sums and the normalisation, in double: 0.77 us
     * for 384 f32 on a Zen 4), some sixteen times an add: one text's 11 rows go to two
     * threads, where a grain of 4 element-passes kept them on one while the other waited. */
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(16 * cols + 1) + 1, layernorm_rows, &job);
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

static void layernorm_grad_rows(void *arg, int64_t begin, int64_t end) {
    const layernorm_grad_job *job = arg;
    gc_cpu_isa isa = gc_cpu_isa_selected();
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * job->cols;
        if (job->dtype == GC_F32) {
            gc_cpu_layernorm_grad_row_f32_on(isa, (const float *)job->x + first, job->gamma,
                                             (const float *)job->g + first, job->dx ? (float *)job->dx + first : NULL,
                                             job->g_xhat ? (float *)job->g_xhat + first : NULL, job->cols, job->eps);
            continue;
        }
        double mean, rstd;
        gc_layernorm_statistics(job->x, job->dtype, first, job->cols, job->eps, &mean, &rstd);
        layernorm_grad_row(job, first, mean, rstd);
    }
}

void gc_cpu_layernorm_backward(const void *x, const void *gamma, const void *g, void *dx, void *g_xhat, size_t rows,
                               size_t cols, double eps, gc_dtype dtype) {
    layernorm_grad_job job = {x, gamma, g, dx, g_xhat, cols, eps, dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(8 * cols + 1) + 1, layernorm_grad_rows, &job);
}
