/* SwiGLU's gated product on CUDA: one thread per element, ../swiglu_impl.h's formulas in the
 * working type on CUDA's expf and exp (the CPU's float e^y is its own: a few ulps apart). */
#include "../swiglu_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

GC_DEFINE_SWIGLU_ELEMENT(float, expf)
GC_DEFINE_SWIGLU_ELEMENT(double, exp)

__device__ inline float swiglu(float gate, float up) { return gc_swiglu_float(gate, up); }
__device__ inline double swiglu(double gate, double up) { return gc_swiglu_double(gate, up); }
__device__ inline void swiglu_grad(float gate, float up, float g, float *d_gate, float *d_up) {
    gc_swiglu_grad_float(gate, up, g, d_gate, d_up);
}
__device__ inline void swiglu_grad(double gate, double up, double g, double *d_gate, double *d_up) {
    gc_swiglu_grad_double(gate, up, g, d_gate, d_up);
}

template <typename T> __global__ void swiglu_kernel(const T *gate, const T *up, T *out, int64_t n) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) out[i] = E::from_acc(swiglu(E::to_acc(gate[i]), E::to_acc(up[i])));
}

template <typename T>
__global__ void swiglu_backward_kernel(const T *gate, const T *up, const T *g, T *d_gate, T *d_up, int64_t n) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        typename E::acc dg, du;
        swiglu_grad(E::to_acc(gate[i]), E::to_acc(up[i]), E::to_acc(g[i]), &dg, &du);
        if (d_gate) d_gate[i] = E::from_acc(dg);
        if (d_up) d_up[i] = E::from_acc(du);
    }
}

} // namespace

extern "C" void gc_cuda_swiglu(const void *gate, const void *up, void *out, size_t n, gc_dtype dtype) {
    gc_cuda_dispatch_float("swiglu", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(swiglu_kernel<T>, gc_cuda_blocks((int64_t)n), (const T *)gate, (const T *)up, (T *)out,
                       (int64_t)n);
    });
}

extern "C" void gc_cuda_swiglu_backward(const void *gate, const void *up, const void *g, void *d_gate, void *d_up,
                                        size_t n, gc_dtype dtype) {
    gc_cuda_dispatch_float("swiglu_backward", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(swiglu_backward_kernel<T>, gc_cuda_blocks((int64_t)n), (const T *)gate, (const T *)up,
                       (const T *)g, (T *)d_gate, (T *)d_up, (int64_t)n);
    });
}
