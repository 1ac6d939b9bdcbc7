/* Dropout on the CPU: the mask from Philox (../philox_impl.h), so that CUDA draws the same.
 * A kept element is x * scale computed in the working type (float for f32, f16 and bf16,
 * as gc_mul_scalar does; double for f64) and rounded once into the dtype. Element i's mask
 * is word offset + i, so the threads can split the elements. The words come from the
 * Philox variant of the selected instruction set (philox_cpu.h), all of which agree.
 * dropout_rows draws each row's words where its position puts them, a run of rows at
 * consecutive positions (a packed sequence's tokens) as one span. */
#include <stdbool.h>
#include <string.h>

#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "philox_cpu.h"
#include "thread_pool.h"

typedef struct dropout_job {
    const char *x;
    char *y;
    gc_dtype dtype;
    uint32_t threshold;
    double scale;
    uint64_t seed, offset;
    gc_philox_batch_fn *philox;
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

/* Elements [start, start + count) from their words. */
static void dropout_span(const dropout_job *job, int64_t start, int count, const uint32_t *words) {
    const float scale_f32 = (float)job->scale;
    const uint32_t threshold = job->threshold;
    if (job->dtype == GC_F32) {
        const float *x = (const float *)job->x + start;
        float *y = (float *)job->y + start;
        for (int j = 0; j < count; j++) y[j] = kept_or_zero(x[j] * scale_f32, (words[j] >> 8) >= threshold);
        return;
    }
    for (int j = 0; j < count; j++) {
        size_t i = (size_t)start + (size_t)j;
        double value = gc_load(job->x, job->dtype, i);
        double kept = job->dtype == GC_F64 ? value * job->scale : (double)((float)value * scale_f32);
        gc_store(job->y, job->dtype, i, (words[j] >> 8) >= threshold ? kept : 0.0);
    }
}

/* A batch of whole Philox blocks at a time; only the first may start inside a block (at word
 * lead of it), after which the words stay aligned to blocks. */
static void dropout_range(void *arg, int64_t begin, int64_t end) {
    const dropout_job *job = arg;
    uint32_t words[GC_PHILOX_BATCH_WORDS];
    for (int64_t start = begin; start < end;) {
        uint64_t first_word = job->offset + (uint64_t)start;
        int lead = (int)(first_word % 4);
        int count = end - start < GC_PHILOX_BATCH_WORDS - lead ? (int)(end - start) : GC_PHILOX_BATCH_WORDS - lead;
        job->philox(job->seed, first_word / 4, words);
        dropout_span(job, start, count, words + lead);
        start += count;
    }
}

void gc_cpu_dropout_on(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale,
                       uint64_t seed, uint64_t offset, gc_cpu_isa isa) {
    dropout_job job = {x, y, dtype, threshold, scale, seed, offset, gc_philox_batch_for(isa)};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 4, dropout_range, &job);
}

/* x, y [n] */
void gc_cpu_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                    uint64_t offset) {
    gc_cpu_dropout_on(x, y, n, dtype, threshold, scale, seed, offset, gc_cpu_isa_selected());
}

typedef struct dropout_rows_job {
    dropout_job elements; /* its offset: the words' start for position 0 */
    const int32_t *positions;
    int64_t cols;
} dropout_rows_job;

/* Rows [begin, end), a run of consecutive positions at a time: element i = r cols + j of a
 * run starting at row `first` reads word offset + (positions[first] - first) cols + i, which
 * is offset + positions[r] cols + j (unsigned, so modulo 2^64 as the kernel's contract says). */
static void dropout_rows_range(void *arg, int64_t begin, int64_t end) {
    const dropout_rows_job *job = arg;
    for (int64_t first = begin, last; first < end; first = last) {
        for (last = first + 1; last < end && job->positions[last] == job->positions[last - 1] + 1;) last++;
        dropout_job run = job->elements;
        run.offset += ((uint64_t)(int64_t)job->positions[first] - (uint64_t)first) * (uint64_t)job->cols;
        dropout_range(&run, first * job->cols, last * job->cols);
    }
}

/* x, y [rows, cols], positions [rows] */
void gc_cpu_dropout_rows(const void *x, void *y, size_t rows, size_t cols, const int32_t *positions, gc_dtype dtype,
                         uint32_t threshold, double scale, uint64_t seed, uint64_t offset) {
    if (cols == 0) return;
    dropout_rows_job job = {{x, y, dtype, threshold, scale, seed, offset, gc_philox_batch_for(gc_cpu_isa_selected())},
                            positions, (int64_t)cols};
    gc_parallel_for((int64_t)rows, GC_GRAIN_ELEMENTS / 4 / (int64_t)cols + 1, dropout_rows_range, &job);
}
