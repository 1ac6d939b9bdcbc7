/* The fused optimizer updates on CUDA: the arithmetic of ../optim_impl.h, shared with the
 * CPU kernels, so the two agree bit for bit. One thread per element (grid-stride); the
 * element is widened exactly to its working type and rounded once when stored. */
#include "../optim_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* The shared formulas, picked by the working type (float or double). */
__device__ inline float sgd_element(float p, float g, float *buf, gc_sgd_hyper h) {
    return gc_sgd_element_float(p, g, buf, h);
}
__device__ inline double sgd_element(double p, double g, float *buf, gc_sgd_hyper h) {
    return gc_sgd_element_double(p, g, buf, h);
}
__device__ inline float adamw_element(float p, float g, float *m, float *v, gc_adamw_hyper h) {
    return gc_adamw_element_float(p, g, m, v, h);
}
__device__ inline double adamw_element(double p, double g, float *m, float *v, gc_adamw_hyper h) {
    return gc_adamw_element_double(p, g, m, v, h);
}

/* param, grad [n]; momentum_buffer f32 [n], or NULL when the momentum is 0 */
template <typename T>
__global__ void sgd_kernel(T *param, const T *grad, float *momentum_buffer, int64_t n, gc_sgd_hyper hyper) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        float *buf = momentum_buffer ? &momentum_buffer[i] : nullptr;
        param[i] = E::from_acc(sgd_element(E::to_acc(param[i]), E::to_acc(grad[i]), buf, hyper));
    }
}

/* param, grad [n]; exp_avg, exp_avg_sq f32 [n] */
template <typename T>
__global__ void adamw_kernel(T *param, const T *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                             gc_adamw_hyper hyper) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        param[i] = E::from_acc(
            adamw_element(E::to_acc(param[i]), E::to_acc(grad[i]), &exp_avg[i], &exp_avg_sq[i], hyper));
    }
}

} // namespace

extern "C" void gc_cuda_sgd_update(void *param, const void *grad, float *momentum_buffer, size_t n, gc_dtype dtype,
                                   const gc_sgd_hyper *hyper) {
    gc_cuda_dispatch_float("sgd_update", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(sgd_kernel<T>, gc_cuda_blocks((int64_t)n), (T *)param, (const T *)grad, momentum_buffer,
                       (int64_t)n, *hyper);
    });
}

extern "C" void gc_cuda_adamw_update(void *param, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                                     gc_dtype dtype, const gc_adamw_hyper *hyper) {
    gc_cuda_dispatch_float("adamw_update", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(adamw_kernel<T>, gc_cuda_blocks((int64_t)n), (T *)param, (const T *)grad, exp_avg, exp_avg_sq,
                       (int64_t)n, *hyper);
    });
}
