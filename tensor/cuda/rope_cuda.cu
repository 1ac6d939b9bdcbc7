/* Rotary position embeddings on CUDA: one thread per pair (x[i], x[i + Dh/2]) of a head, by
 * ../rope_impl.h's formula in the working type, as tensor/cpu/rope_cpu.c computes it (the
 * same bits: see rope_impl.h). */
#include "../rope_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

__device__ inline void rope_pair(float a, float b, float c, float s, bool inverse, float *ya, float *yb) {
    gc_rope_pair_float(a, b, c, s, inverse, ya, yb);
}
__device__ inline void rope_pair(double a, double b, double c, double s, bool inverse, double *ya, double *yb) {
    gc_rope_pair_double(a, b, c, s, inverse, ya, yb);
}

/* x, y [rows, heads, head_dim]; table [length, head_dim] of the working type A. */
template <typename T, typename A = typename gc_elem<T>::acc>
__global__ void rope_kernel(const T *x, const A *table, T *y, int64_t pairs, size_t length, size_t heads,
                            size_t head_dim, bool inverse) {
    using E = gc_elem<T>;
    int64_t half = (int64_t)head_dim / 2;
    GC_CUDA_GRID_STRIDE(p, pairs) {
        int64_t i = p % half, head_row = p / half; /* head_row: (row, head) */
        int64_t row = head_row / (int64_t)heads, first = head_row * (int64_t)head_dim;
        const A *cosines = table + (row % (int64_t)length) * (int64_t)head_dim;
        A ya, yb;
        rope_pair(E::to_acc(x[first + i]), E::to_acc(x[first + i + half]), cosines[i], cosines[half + i], inverse,
                  &ya, &yb);
        y[first + i] = E::from_acc(ya);
        y[first + i + half] = E::from_acc(yb);
    }
}

} // namespace

extern "C" void gc_cuda_rope(const void *x, const void *table, void *y, size_t rows, size_t length, size_t heads,
                             size_t head_dim, bool inverse, gc_dtype dtype) {
    int64_t pairs = (int64_t)(rows * heads * (head_dim / 2));
    gc_cuda_dispatch_float("rope", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = typename gc_elem<T>::acc;
        GC_CUDA_LAUNCH(rope_kernel<T>, gc_cuda_blocks(pairs), (const T *)x, (const A *)table, (T *)y, pairs, length,
                       heads, head_dim, inverse);
    });
}
