/* RMSNorm on CUDA: one block per row of x [rows, cols] (reduce_common.cuh), the sum of
 * squares a block reduction in the working type; every element by ../rmsnorm_impl.h's
 * formulas. Same semantics as tensor/cpu/rmsnorm_cpu.c (which sums in double). */
#include "../rmsnorm_impl.h"
#include "kernels_cuda.h"
#include "reduce_common.cuh"

namespace {

/* The shared formulas, picked by the working type (float or double). */
#define RMSNORM_OVERLOADS(T)                                                                                 \
    __device__ inline T rmsnorm_rstd(T sum_squares, T cols, T eps) {                                        \
        return gc_rmsnorm_rstd_##T(sum_squares, cols, eps);                                                  \
    }                                                                                                        \
    __device__ inline T rmsnorm_element(T x, T rstd, T w) { return gc_rmsnorm_element_##T(x, rstd, w); }    \
    __device__ inline T rmsnorm_dx(T x, T gw, T rstd, T mean) { return gc_rmsnorm_dx_##T(x, gw, rstd, mean); }
RMSNORM_OVERLOADS(float)
RMSNORM_OVERLOADS(double)

/* 1 / sqrt(mean(x^2) + eps) of the row xr [cols], in every thread of the block. */
template <typename T> __device__ typename gc_elem<T>::acc row_rstd(const T *xr, size_t cols, double eps) {
    using A = typename gc_elem<T>::acc;
    auto square = [&](size_t i) {
        A v = gc_elem<T>::to_acc(xr[i]);
        return v * v;
    };
    return rmsnorm_rstd(gc_row_reduce(cols, A(0), square, gc_plus()), (A)cols, (A)eps);
}

/* w[i], or 1 without a weight. */
template <typename T> __device__ typename gc_elem<T>::acc weight_at(const T *w, size_t i) {
    return w ? gc_elem<T>::to_acc(w[i]) : typename gc_elem<T>::acc(1);
}

template <typename T>
__global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    rmsnorm_kernel(const T *x, const T *w, T *y, size_t rows, size_t cols, double eps) {
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        auto rstd = row_rstd(xr, cols, eps);
        for (size_t i = threadIdx.x; i < cols; i += blockDim.x)
            y[row * cols + i] = gc_elem<T>::from_acc(rmsnorm_element(gc_elem<T>::to_acc(xr[i]), rstd, weight_at(w, i)));
    }
}

/* dx (or NULL) of T and g_xhat (or NULL) of the working type A, per row. */
template <typename T, typename A = typename gc_elem<T>::acc>
__global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    rmsnorm_backward_kernel(const T *x, const T *w, const T *g, T *dx, A *g_xhat, size_t rows, size_t cols,
                            double eps) {
    using E = gc_elem<T>;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols, *gr = g + row * cols;
        A rstd = row_rstd(xr, cols, eps);
        auto gw_xhat = [&](size_t i) { return E::to_acc(gr[i]) * weight_at(w, i) * E::to_acc(xr[i]) * rstd; };
        A mean = gc_row_reduce(cols, A(0), gw_xhat, gc_plus()) / (A)cols;
        for (size_t i = threadIdx.x; i < cols; i += blockDim.x) {
            A xi = E::to_acc(xr[i]), gi = E::to_acc(gr[i]);
            if (g_xhat) g_xhat[row * cols + i] = gi * xi * rstd;
            if (dx) dx[row * cols + i] = E::from_acc(rmsnorm_dx(xi, gi * weight_at(w, i), rstd, mean));
        }
    }
}

} // namespace

extern "C" void gc_cuda_rmsnorm(const void *x, const void *weight, void *y, size_t rows, size_t cols, double eps,
                                gc_dtype dtype) {
    gc_cuda_dispatch_float("rmsnorm", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_ROW_LAUNCH(rmsnorm_kernel<T>, rows, cols, (const T *)x, (const T *)weight, (T *)y, rows, cols, eps);
    });
}

extern "C" void gc_cuda_rmsnorm_backward(const void *x, const void *weight, const void *g, void *dx, void *g_xhat,
                                         size_t rows, size_t cols, double eps, gc_dtype dtype) {
    gc_cuda_dispatch_float("rmsnorm_backward", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = typename gc_elem<T>::acc;
        GC_ROW_LAUNCH(rmsnorm_backward_kernel<T>, rows, cols, (const T *)x, (const T *)weight, (const T *)g, (T *)dx,
                      (A *)g_xhat, rows, cols, eps);
    });
}
