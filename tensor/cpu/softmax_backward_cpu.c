/* The fused softmax backward (backend_kernels.h, softmax_backward): per row of y, g [cols],
 * dx = scale y (g - sum(g y)) in one pass, where the composed ops make five over the whole
 * tensor. Each intermediate is rounded as its op rounds it, so the bits are theirs:
 *   g y               in the dtype (gc_mul),
 *   sum(g y)          in double lanes (rows_cpu.h), rounded once to the dtype (gc_sum_last),
 *   y (g - sum)       in the dtype, a subtraction then a product (gc_sub, gc_mul),
 *   times scale       the scale rounded to the dtype first (gc_mul_scalar), skipped at 1.
 * Each row is one thread's, so the bits do not depend on GC_NUM_THREADS. */
#include "kernels_cpu.h"
#include "rows_cpu.h"
#include "thread_pool.h"

typedef struct softmax_backward_job {
    const void *y, *g;
    void *dx;
    size_t cols;
    double scale;
    gc_dtype dtype;
} softmax_backward_job;

/* W is float or double; SUFFIX names the row function of that type. */
#define DEFINE_SOFTMAX_BACKWARD_ROW(W, SUFFIX)                                                                      \
    static void softmax_backward_row_##SUFFIX(const W *y, const W *g, W *dx, size_t cols, double scale) {           \
        double chunk[GC_CPU_CHUNK], lanes[GC_SUM_LANES] = {0};                                                      \
        for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {                                               \
            size_t len = gc_chunk_len(cols, start);                                                                 \
            for (size_t j = 0; j < len; j++) chunk[j] = (double)(W)(g[start + j] * y[start + j]);                   \
            gc_add_to_lanes(chunk, len, lanes);                                                                     \
        }                                                                                                           \
        const W total = (W)gc_lanes_total(lanes), factor = (W)scale;                                                \
        for (size_t j = 0; j < cols; j++) dx[j] = y[j] * (g[j] - total);                                            \
        if (scale != 1.0)                                                                                           \
            for (size_t j = 0; j < cols; j++) dx[j] = dx[j] * factor;                                               \
    }

DEFINE_SOFTMAX_BACKWARD_ROW(float, f32)
DEFINE_SOFTMAX_BACKWARD_ROW(double, f64)

static void softmax_backward_rows(void *arg, int64_t begin, int64_t end) {
    const softmax_backward_job *job = arg;
    size_t cols = job->cols;
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * cols;
        if (job->dtype == GC_F32)
            softmax_backward_row_f32((const float *)job->y + first, (const float *)job->g + first,
                                     (float *)job->dx + first, cols, job->scale);
        else
            softmax_backward_row_f64((const double *)job->y + first, (const double *)job->g + first,
                                     (double *)job->dx + first, cols, job->scale);
    }
}

void gc_cpu_softmax_backward(const void *y, const void *g, void *dx, size_t rows, size_t cols, double scale,
                             gc_dtype dtype) {
    softmax_backward_job job = {y, g, dx, cols, scale, dtype};
    /* two products, a sum and a subtraction per element: a sum's grain */
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(cols + 1) + 1, softmax_backward_rows, &job);
}
