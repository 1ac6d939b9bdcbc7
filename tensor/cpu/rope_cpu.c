/* Rotary position embeddings on the CPU (tensor/rope_impl.h): f32, f16 and bf16 computed in
 * float (the 16-bit types rounded once when stored), f64 in double; the table is of the
 * working dtype. The threads split the rows (one position of one sequence: every head). */
#include "../rope_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

typedef struct rope_job {
    const void *x, *table;
    void *y;
    size_t length, heads, head_dim;
    bool inverse;
    gc_dtype dtype;
} rope_job;

/* Row `row` of f16 or bf16: every head's pairs, computed in float, each element read and
 * written through gc_load and gc_store (which rounds the float once). */
static void rope_row_half(const rope_job *job, size_t row) {
    size_t half = job->head_dim / 2, width = job->heads * job->head_dim;
    const float *cosines = (const float *)job->table + (row % job->length) * job->head_dim, *sines = cosines + half;
    for (size_t head = 0; head < job->heads; head++) {
        size_t first = row * width + head * job->head_dim;
        for (size_t i = 0; i < half; i++) {
            float a = (float)gc_load(job->x, job->dtype, first + i), b = (float)gc_load(job->x, job->dtype, first + i + half);
            float ya, yb;
            gc_rope_pair_float(a, b, cosines[i], sines[i], job->inverse, &ya, &yb);
            gc_store(job->y, job->dtype, first + i, ya);
            gc_store(job->y, job->dtype, first + i + half, yb);
        }
    }
}

/* f32 and f64, straight from and to the arrays of T (f32: the hot path of CPU training). */
#define DEFINE_ROPE_ROW(T)                                                                                          \
    static void rope_row_##T(const rope_job *job, size_t row) {                                                     \
        size_t half = job->head_dim / 2, width = job->heads * job->head_dim;                                        \
        const T *x = (const T *)job->x + row * width;                                                               \
        const T *cosines = (const T *)job->table + (row % job->length) * job->head_dim;                             \
        T *y = (T *)job->y + row * width;                                                                           \
        for (size_t head = 0; head < job->heads; head++, x += job->head_dim, y += job->head_dim)                    \
            for (size_t i = 0; i < half; i++)                                                                       \
                gc_rope_pair_##T(x[i], x[i + half], cosines[i], cosines[half + i], job->inverse, &y[i], &y[i + half]); \
    }
DEFINE_ROPE_ROW(float)
DEFINE_ROPE_ROW(double)

static void rope_rows(void *arg, int64_t begin, int64_t end) {
    const rope_job *job = arg;
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        if (job->dtype == GC_F32) rope_row_float(job, row);
        else if (job->dtype == GC_F64) rope_row_double(job, row);
        else rope_row_half(job, row);
    }
}

void gc_cpu_rope(const void *x, const void *table, void *y, size_t rows, size_t length, size_t heads,
                 size_t head_dim, bool inverse, gc_dtype dtype) {
    rope_job job = {x, table, y, length, heads, head_dim, inverse, dtype};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / (int64_t)(heads * head_dim + 1) + 1, rope_rows, &job);
}
