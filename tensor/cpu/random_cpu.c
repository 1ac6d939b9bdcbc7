/* Uniform and normal random numbers on the CPU (the arithmetic: ../philox_impl.h).
 * gc_store rounds the double once to the dtype, as the CUDA kernel does. Element i reads
 * its own words of the stream, so the threads can split the elements. */
#include "../philox_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

typedef struct random_job {
    char *dst;
    gc_dtype dtype;
    gc_random_kind kind;
    uint64_t seed, offset;
    double a, b;
} random_job;

static void random_range(void *arg, int64_t begin, int64_t end) {
    const random_job *job = arg;
    gc_philox_reader reader = gc_philox_reader_start(job->seed);
    for (int64_t i = begin; i < end; i++)
        gc_store(job->dst, job->dtype, (size_t)i,
                 gc_philox_sample(&reader, job->kind, job->offset, (uint64_t)i, job->a, job->b));
}

/* dst [n] */
void gc_cpu_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                   uint64_t offset, double a, double b) {
    random_job job = {dst, dtype, kind, seed, offset, a, b};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 16, random_range, &job);
}
