/* Uniform and normal random numbers on CUDA: the same arithmetic as the CPU kernel
 * (../philox_impl.h), so the two agree bit for bit. Every element's value depends only on
 * its index (a thread's reader merely caches Philox blocks), so the grid is free. */
#include "../philox_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

/* dst [n]: one thread per group of GC_RANDOM_PER_THREAD consecutive elements, which share
 * Philox blocks that the thread's reader computes once (../launch_impl.h). */
template <typename T>
static __global__ void random_kernel(T *dst, size_t n, gc_random_kind kind, uint64_t seed,
                                     uint64_t offset, double a, double b) {
    const size_t groups = gc_random_group_count(n);
    GC_CUDA_GRID_STRIDE(g, groups) {
        gc_philox_reader reader = gc_philox_reader_start(seed);
        size_t begin, end;
        gc_random_group((size_t)g, n, &begin, &end);
        for (size_t i = begin; i < end; i++)
            dst[i] = gc_elem<T>::from_double(gc_philox_sample(&reader, kind, offset, i, a, b));
    }
}

/* dst [n] */
extern "C" void gc_cuda_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind,
                               uint64_t seed, uint64_t offset, double a, double b) {
    gc_cuda_dispatch_float("random", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(random_kernel<T>, gc_cuda_blocks((int64_t)gc_random_group_count(n)), (T *)dst, n, kind, seed,
                       offset, a, b);
    });
}
