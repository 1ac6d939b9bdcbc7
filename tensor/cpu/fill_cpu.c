/* Fill, arange and dtype conversion on the CPU, split between the threads (each element is
 * computed alone). */
#include <string.h>

#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

typedef struct fill_job {
    char *dst;
    gc_dtype dtype;
    double value, step; /* arange: value + i step; fill: step 0 */
} fill_job;

static void fill_range(void *arg, int64_t begin, int64_t end) {
    const fill_job *job = arg;
    size_t n = (size_t)(end - begin);
    void *dst = job->dst + (size_t)begin * gc_dtype_size(job->dtype);
    if (job->step == 0 && job->value == 0 && !signbit(job->value)) { /* +0 is all-zero bits in every dtype */
        memset(dst, 0, n * gc_dtype_size(job->dtype));
        return;
    }
    if (job->step == 0 && job->dtype == GC_F32) {
        float value = (float)job->value, *out = dst;
        for (size_t i = 0; i < n; i++) out[i] = value;
        return;
    }
    for (size_t i = 0; i < n; i++) gc_store(dst, job->dtype, i, job->value + (double)(begin + (int64_t)i) * job->step);
}

void gc_cpu_fill(void *dst, size_t n, gc_dtype dtype, double value) {
    fill_job job = {dst, dtype, value, 0};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS, fill_range, &job);
}

void gc_cpu_arange(void *dst, size_t n, gc_dtype dtype, double start, double step) {
    fill_job job = {dst, dtype, start, step};
    /* step 0 would be a fill: the same values either way */
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS, fill_range, &job);
}

typedef struct cast_job {
    const char *src;
    gc_dtype src_dtype;
    char *dst;
    gc_dtype dst_dtype;
} cast_job;

/* Through double, which holds every value of every dtype exactly; so the only rounding
 * is the one into the destination type (f32 -> f16 rounds once: double -> f32 is exact
 * for a value that came from f32). Float to i32 truncates toward zero, as in C. */
static void cast_range(void *arg, int64_t begin, int64_t end) {
    const cast_job *job = arg;
    const void *src = job->src + (size_t)begin * gc_dtype_size(job->src_dtype);
    void *dst = job->dst + (size_t)begin * gc_dtype_size(job->dst_dtype);
    for (size_t i = 0; i < (size_t)(end - begin); i++)
        gc_store(dst, job->dst_dtype, i, gc_load(src, job->src_dtype, i));
}

void gc_cpu_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n) {
    cast_job job = {src, src_dtype, dst, dst_dtype};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS, cast_range, &job);
}
