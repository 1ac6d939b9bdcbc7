/* Uniform and normal random numbers on CUDA: the same arithmetic as the CPU kernel
 * (../philox_impl.h), so the two agree bit for bit. Every element's value depends only on
 * its index (a thread's reader merely caches Philox blocks), so the grid is free. */
#include "../philox_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

/* Consecutive elements handled by one thread: they share Philox blocks, which the
 * thread's reader computes once (a block is 4 words: 4 uniforms or 2 normals). */
#define GC_RANDOM_PER_THREAD 4

/* Groups of GC_RANDOM_PER_THREAD elements in n, the last one possibly shorter. */
static __host__ __device__ size_t group_count(size_t n) {
    return n / GC_RANDOM_PER_THREAD + (n % GC_RANDOM_PER_THREAD != 0);
}

/* dst [n]: one thread per group. */
template <typename T>
static __global__ void random_kernel(T *dst, size_t n, gc_random_kind kind, uint64_t seed,
                                     uint64_t offset, double a, double b) {
    const size_t groups = group_count(n);
    GC_CUDA_GRID_STRIDE(g, groups) {
        gc_philox_reader reader = gc_philox_reader_start(seed);
        size_t begin = (size_t)g * GC_RANDOM_PER_THREAD;
        size_t end = n - begin < GC_RANDOM_PER_THREAD ? n : begin + GC_RANDOM_PER_THREAD;
        for (size_t i = begin; i < end; i++)
            dst[i] = gc_elem<T>::from_double(gc_philox_sample(&reader, kind, offset, i, a, b));
    }
}

/* dst [n] */
extern "C" void gc_cuda_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind,
                               uint64_t seed, uint64_t offset, double a, double b) {
    gc_cuda_dispatch_float("random", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        gc_cuda_launch(random_kernel<T>, gc_cuda_blocks((int64_t)group_count(n)), (T *)dst, n, kind, seed,
                       offset, a, b);
    });
}
