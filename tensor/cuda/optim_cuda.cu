/* The fused optimizer updates on CUDA: the arithmetic of ../optim_impl.h, shared with the
 * CPU kernels, so the two agree bit for bit. One thread per element (grid-stride); the
 * element is widened exactly to its working type and rounded once when stored. A parameter
 * with an f32 master copy is read from the master, and the new value goes into the master
 * before it is rounded into the parameter, in the same pass. */
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

/* Element i as the update starts from it: the master's when there is one (f16 and bf16
 * parameters only, whose working type is float). */
template <typename T>
__device__ inline typename gc_elem<T>::acc load_working(const T *param, const float *master, int64_t i) {
    using A = typename gc_elem<T>::acc;
    return master ? (A)master[i] : gc_elem<T>::to_acc(param[i]);
}

template <typename T>
__device__ inline void store_updated(T *param, float *master, int64_t i, typename gc_elem<T>::acc value) {
    if (master) master[i] = (float)value;
    param[i] = gc_elem<T>::from_acc(value);
}

/* param, grad [n]; master f32 [n] or NULL; momentum_buffer f32 [n], or NULL when the
 * momentum is 0 */
template <typename T>
__global__ void sgd_kernel(T *param, float *master, const T *grad, float *momentum_buffer, int64_t n,
                           gc_sgd_hyper hyper) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        float *buf = momentum_buffer ? &momentum_buffer[i] : nullptr;
        store_updated(param, master, i, sgd_element(load_working(param, master, i), E::to_acc(grad[i]), buf, hyper));
    }
}

/* param, grad [n]; master f32 [n] or NULL; exp_avg, exp_avg_sq f32 [n] */
template <typename T>
__global__ void adamw_kernel(T *param, float *master, const T *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                             gc_adamw_hyper hyper) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        store_updated(param, master, i,
                      adamw_element(load_working(param, master, i), E::to_acc(grad[i]), &exp_avg[i], &exp_avg_sq[i],
                                    hyper));
    }
}

} // namespace

extern "C" void gc_cuda_sgd_update(void *param, float *master, const void *grad, float *momentum_buffer, size_t n,
                                   gc_dtype dtype, const gc_sgd_hyper *hyper) {
    gc_cuda_dispatch_float("sgd_update", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(sgd_kernel<T>, gc_cuda_blocks((int64_t)n), (T *)param, master, (const T *)grad,
                       momentum_buffer, (int64_t)n, *hyper);
    });
}

extern "C" void gc_cuda_adamw_update(void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq,
                                     size_t n, gc_dtype dtype, const gc_adamw_hyper *hyper) {
    gc_cuda_dispatch_float("adamw_update", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(adamw_kernel<T>, gc_cuda_blocks((int64_t)n), (T *)param, master, (const T *)grad, exp_avg,
                       exp_avg_sq, (int64_t)n, *hyper);
    });
}
