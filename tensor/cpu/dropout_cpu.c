/* Dropout on the CPU: the mask from Philox (../philox_impl.h), so that CUDA draws the same.
 * A kept element is x * scale computed in the working type (float for f32, f16 and bf16,
 * as gc_mul_scalar does; double for f64) and rounded once into the dtype. Element i's mask
 * is word offset + i, so the threads can split the elements. */
#include <stdbool.h>
#include <string.h>

#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "philox_cpu.h"
#include "thread_pool.h"

/* Elements whose words are drawn at once (a multiple of 4 below 4 GC_PHILOX_BATCH - 3). */
#define SPAN 60

typedef struct dropout_job {
    const char *x;
    char *y;
    gc_dtype dtype;
    uint32_t threshold;
    double scale;
    uint64_t seed, offset;
} dropout_job;

/* `kept`, or +0 when !keep, by masking its bits: gcc vectorises this, where it leaves the
 * plain float select `keep ? kept : 0.0f` branchy and scalar (with the default
 * -ftrapping-math it does not if-convert it), which costs more than the Philox words. */
static inline float kept_or_zero(float kept, bool keep) {
    uint32_t bits;
    memcpy(&bits, &kept, sizeof bits);
    bits &= 0u - (uint32_t)keep;
    memcpy(&kept, &bits, sizeof kept);
    return kept;
}

static void dropout_range(void *arg, int64_t begin, int64_t end) {
    const dropout_job *job = arg;
    const float scale_f32 = (float)job->scale;
    uint32_t words[SPAN];
    for (int64_t start = begin; start < end; start += SPAN) {
        int count = end - start < SPAN ? (int)(end - start) : SPAN;
        gc_philox_words(job->seed, job->offset + (uint64_t)start, count, words);
        if (job->dtype == GC_F32) {
            const float *x = (const float *)job->x + start;
            float *y = (float *)job->y + start;
            for (int j = 0; j < count; j++) y[j] = kept_or_zero(x[j] * scale_f32, (words[j] >> 8) >= job->threshold);
            continue;
        }
        for (int j = 0; j < count; j++) {
            size_t i = (size_t)start + (size_t)j;
            double value = gc_load(job->x, job->dtype, i);
            double kept = job->dtype == GC_F64 ? value * job->scale : (double)((float)value * scale_f32);
            gc_store(job->y, job->dtype, i, (words[j] >> 8) >= job->threshold ? kept : 0.0);
        }
    }
}

/* x, y [n] */
void gc_cpu_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                    uint64_t offset) {
    dropout_job job = {x, y, dtype, threshold, scale, seed, offset};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 4, dropout_range, &job);
}
