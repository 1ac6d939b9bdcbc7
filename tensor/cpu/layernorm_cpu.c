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
    double chunk[GC_CPU_CHUNK], sum = 0.0;
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        gc_load_span(x, dtype, first + start, len, chunk);
        for (size_t j = 0; j < len; j++) sum += (chunk[j] - mean) * (chunk[j] - mean);
    }
    return sum;
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
        double row_mean = gc_sum_span(job->x, job->dtype, first, cols) / (double)cols;
        double variance = squared_deviation(job->x, job->dtype, first, cols, row_mean) / (double)cols;
        double row_rstd = 1.0 / sqrt(variance + job->eps);
        normalize_row(job->x, job->gamma, job->beta, job->y, first, cols, row_mean, row_rstd, job->dtype);
        if (job->mean) job->mean[row] = (float)row_mean;
        if (job->rstd) job->rstd[row] = (float)row_rstd;
    }
}

void gc_cpu_layernorm(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                      float *rstd, size_t rows, size_t cols, double eps, gc_dtype dtype) {
    layernorm_job job = {x, gamma, beta, y, mean, rstd, cols, eps, dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(4 * cols + 1) + 1, layernorm_rows, &job);
}
