/* Dropout on CUDA: the CPU's mask and values (tensor/cpu/dropout_cpu.c) bit for bit. The
 * mask comes from the same Philox words (../philox_impl.h), and a kept element is one
 * multiply in gc_elem<T>::acc rounded once into T, as on the CPU. */
#include "../philox_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* x, y [n] */
template <typename T>
__global__ void dropout_kernel(const T *x, T *y, int64_t n, uint32_t threshold, double scale, uint64_t seed,
                               uint64_t offset) {
    using acc = typename gc_elem<T>::acc;
    const acc scale_acc = (acc)scale; /* the CPU's (float)scale for the 32- and 16-bit types */
    /* a thread per group of elements whose words share a Philox block (../launch_impl.h) */
    const int64_t groups = gc_dropout_group_count(n, offset);
    GC_CUDA_GRID_STRIDE(g, groups) {
        gc_philox_reader reader = gc_philox_reader_start(seed);
        int64_t begin, end;
        gc_dropout_group(g, n, offset, &begin, &end);
        for (int64_t i = begin; i < end; i++) {
            bool keep = (gc_philox_read(&reader, offset + (uint64_t)i) >> 8) >= threshold;
            y[i] = gc_elem<T>::from_acc(keep ? gc_elem<T>::to_acc(x[i]) * scale_acc : (acc)0);
        }
    }
}

} // namespace

/* x, y [n] */
extern "C" void gc_cuda_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale,
                                uint64_t seed, uint64_t offset) {
    gc_cuda_dispatch_float("dropout", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(dropout_kernel<T>, gc_cuda_blocks(gc_dropout_group_count((int64_t)n, offset)), (const T *)x,
                       (T *)y, (int64_t)n, threshold, scale, seed, offset);
    });
}
