/* Fill, arange and dtype conversion on CUDA: the same values as tensor/cpu/fill_cpu.c,
 * bit for bit (every value goes through double and gc_elem<T>::from_double, the CPU's
 * gc_store). */
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* dst [n] = value, already converted to T on the host. */
template <typename T> __global__ void fill_kernel(T *dst, int64_t n, T value) {
    GC_CUDA_GRID_STRIDE(i, n) dst[i] = value;
}

/* dst [n]: dst[i] = start + i * step. The explicitly rounded operations keep nvcc from
 * fusing them into one fma, so the value is the CPU's (C11 does not contract). */
template <typename T> __global__ void arange_kernel(T *dst, int64_t n, double start, double step) {
    GC_CUDA_GRID_STRIDE(i, n) dst[i] = gc_elem<T>::from_double(__dadd_rn(start, __dmul_rn((double)i, step)));
}

/* src [n] -> dst [n] through double, which holds every value of every dtype exactly: the
 * only rounding is the one into D (so f32 -> f16 rounds once), and float -> i32
 * truncates toward zero. */
template <typename S, typename D> __global__ void cast_kernel(const S *src, D *dst, int64_t n) {
    GC_CUDA_GRID_STRIDE(i, n) dst[i] = gc_elem<D>::from_double(gc_to_double(src[i]));
}

} // namespace

extern "C" void gc_cuda_fill(void *dst, size_t n, gc_dtype dtype, double value) {
    gc_cuda_dispatch_all("fill", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(fill_kernel<T>, gc_cuda_blocks((int64_t)n), (T *)dst, (int64_t)n,
                       gc_elem<T>::from_double(value));
    });
}

extern "C" void gc_cuda_arange(void *dst, size_t n, gc_dtype dtype, double start, double step) {
    gc_cuda_dispatch_all("arange", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(arange_kernel<T>, gc_cuda_blocks((int64_t)n), (T *)dst, (int64_t)n, start, step);
    });
}

extern "C" void gc_cuda_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n) {
    gc_cuda_dispatch_all("cast", src_dtype, [&](auto src_tag) {
        gc_cuda_dispatch_all("cast", dst_dtype, [&](auto dst_tag) {
            using S = typename decltype(src_tag)::type;
            using D = typename decltype(dst_tag)::type;
            GC_CUDA_LAUNCH(cast_kernel<S, D>, gc_cuda_blocks((int64_t)n), (const S *)src, (D *)dst, (int64_t)n);
        });
    });
}
