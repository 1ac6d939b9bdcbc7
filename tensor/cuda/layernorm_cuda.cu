/* Layer normalisation over the last dim on CUDA: one block per row of x [rows, cols] (see
 * reduce_common.cuh). Same semantics as tensor/cpu/layernorm_cpu.c. */
#include "kernels_cuda.h"
#include "reduce_common.cuh"

/* y [rows, cols] = (x - mean) * rstd * gamma + beta for each row of x [rows, cols], with
 * gamma, beta [cols] (NULL: 1 and 0); mean_out, rstd_out [rows] (NULL: not kept). The
 * variance is the mean of the squared deviations from the mean, a second pass over the
 * row: unlike E[x^2] - E[x]^2 it does not cancel when the mean is large. */
template <typename T>
static __global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    layernorm_kernel(const T *x, const T *gamma, const T *beta, T *y, float *mean_out, float *rstd_out,
                     size_t rows, size_t cols, double eps) {
    using A = typename gc_elem<T>::acc;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        T *yr = y + row * cols;
        auto load = [&](size_t i) { return gc_elem<T>::to_acc(xr[i]); };
        A mean = gc_row_reduce(cols, A(0), load, gc_plus()) / (A)cols;
        auto squared_deviation = [&](size_t i) {
            A d = load(i) - mean;
            return d * d;
        };
        A var = gc_row_reduce(cols, A(0), squared_deviation, gc_plus()) / (A)cols;
        A rstd = A(1) / sqrt(var + (A)eps);
        for (size_t i = threadIdx.x; i < cols; i += blockDim.x) {
            A value = (load(i) - mean) * rstd;
            if (gamma) value *= gc_elem<T>::to_acc(gamma[i]);
            if (beta) value += gc_elem<T>::to_acc(beta[i]);
            yr[i] = gc_elem<T>::from_acc(value);
        }
        if (threadIdx.x == 0) {
            if (mean_out) mean_out[row] = (float)mean;
            if (rstd_out) rstd_out[row] = (float)rstd;
        }
    }
}

extern "C" void gc_cuda_layernorm(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                                  float *rstd, size_t rows, size_t cols, double eps, gc_dtype dtype) {
    if (rows == 0) return;
    gc_cuda_dispatch_float("layernorm", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_ROW_LAUNCH(layernorm_kernel<T>, rows, cols, (const T *)x, (const T *)gamma, (const T *)beta, (T *)y, mean,
                      rstd, rows, cols, eps);
    });
}
