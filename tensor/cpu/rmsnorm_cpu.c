/* RMSNorm on the CPU, per row of x [rows, cols]: the sum of squares in double in four lanes
 * (rows_cpu.h), then each element by tensor/rmsnorm_impl.h's formulas in double, rounded
 * once into its dtype. The threads split the rows. */
#include "../rmsnorm_impl.h"
#include "kernels_cpu.h"
#include "rows_cpu.h"
#include "thread_pool.h"

typedef struct rmsnorm_job {
    const void *x, *weight, *g;
    void *y, *dx, *g_xhat;
    size_t cols;
    double eps;
    gc_dtype dtype;
} rmsnorm_job;

/* 1 / sqrt(mean(x^2) + eps) of the row at `first`. */
static double row_rstd(const rmsnorm_job *job, size_t first) {
    double chunk[GC_CPU_CHUNK], lanes[GC_SUM_LANES] = {0};
    for (size_t start = 0; start < job->cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(job->cols, start);
        gc_load_span(job->x, job->dtype, first + start, len, chunk);
        for (size_t j = 0; j < len; j++) chunk[j] *= chunk[j];
        gc_add_to_lanes(chunk, len, lanes);
    }
    return gc_rmsnorm_rstd_double(gc_lanes_total(lanes), (double)job->cols, job->eps);
}

/* weight[start .. start + len) into out, or 1s without a weight. */
static void load_weight(const rmsnorm_job *job, size_t start, size_t len, double *out) {
    if (job->weight) {
        gc_load_span(job->weight, job->dtype, start, len, out);
        return;
    }
    for (size_t j = 0; j < len; j++) out[j] = 1.0;
}

static void rmsnorm_rows(void *arg, int64_t begin, int64_t end) {
    const rmsnorm_job *job = arg;
    double x[GC_CPU_CHUNK], w[GC_CPU_CHUNK];
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * job->cols;
        double rstd = row_rstd(job, first);
        for (size_t start = 0; start < job->cols; start += GC_CPU_CHUNK) {
            size_t len = gc_chunk_len(job->cols, start);
            gc_load_span(job->x, job->dtype, first + start, len, x);
            load_weight(job, start, len, w);
            for (size_t j = 0; j < len; j++) x[j] = gc_rmsnorm_element_double(x[j], rstd, w[j]);
            gc_store_span(job->y, job->dtype, first + start, len, x);
        }
    }
}

void gc_cpu_rmsnorm(const void *x, const void *weight, void *y, size_t rows, size_t cols, double eps,
                    gc_dtype dtype) {
    rmsnorm_job job = {.x = x, .weight = weight, .y = y, .cols = cols, .eps = eps, .dtype = dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(3 * cols + 1) + 1, rmsnorm_rows, &job);
}

/* gw = g w of the chunk at `start` of the row at `first` into gw, and x into x. */
static void load_grad_chunk(const rmsnorm_job *job, size_t first, size_t start, size_t len, double *x, double *gw) {
    double w[GC_CPU_CHUNK];
    gc_load_span(job->x, job->dtype, first + start, len, x);
    gc_load_span(job->g, job->dtype, first + start, len, gw);
    load_weight(job, start, len, w);
    for (size_t j = 0; j < len; j++) gw[j] *= w[j];
}

/* One row: mean(gw xhat) and g xhat in a first pass, dx in a second. */
static void rmsnorm_grad_row(const rmsnorm_job *job, size_t first) {
    double rstd = row_rstd(job, first), x[GC_CPU_CHUNK], gw[GC_CPU_CHUNK], term[GC_CPU_CHUNK];
    double lanes[GC_SUM_LANES] = {0};
    for (size_t start = 0; start < job->cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(job->cols, start);
        load_grad_chunk(job, first, start, len, x, gw);
        for (size_t j = 0; j < len; j++) term[j] = gw[j] * x[j] * rstd;
        gc_add_to_lanes(term, len, lanes);
        if (!job->g_xhat) continue;
        gc_load_span(job->g, job->dtype, first + start, len, term);
        for (size_t j = 0; j < len; j++) term[j] *= x[j] * rstd;
        gc_store_span(job->g_xhat, gc_working_dtype(job->dtype), first + start, len, term);
    }
    if (!job->dx) return;
    double mean_gw_xhat = gc_lanes_total(lanes) / (double)job->cols;
    for (size_t start = 0; start < job->cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(job->cols, start);
        load_grad_chunk(job, first, start, len, x, gw);
        for (size_t j = 0; j < len; j++) x[j] = gc_rmsnorm_dx_double(x[j], gw[j], rstd, mean_gw_xhat);
        gc_store_span(job->dx, job->dtype, first + start, len, x);
    }
}

static void rmsnorm_grad_rows(void *arg, int64_t begin, int64_t end) {
    for (size_t row = (size_t)begin; row < (size_t)end; row++)
        rmsnorm_grad_row(arg, row * ((const rmsnorm_job *)arg)->cols);
}

void gc_cpu_rmsnorm_backward(const void *x, const void *weight, const void *g, void *dx, void *g_xhat, size_t rows,
                             size_t cols, double eps, gc_dtype dtype) {
    rmsnorm_job job = {x, weight, g, NULL, dx, g_xhat, cols, eps, dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(8 * cols + 1) + 1, rmsnorm_grad_rows, &job);
}
