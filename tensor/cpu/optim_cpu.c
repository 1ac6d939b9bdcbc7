/* The fused optimizer updates on the CPU (the arithmetic: ../optim_impl.h, shared with
 * CUDA). Each element is loaded exactly as a double, updated in its working precision
 * (f64 for f64 parameters, f32 otherwise) and stored back by gc_store, which rounds it once
 * into the parameter's dtype. */
#include "../optim_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"

/* param, grad [n] of dtype; momentum_buffer f32 [n], or NULL when the momentum is 0 */
void gc_cpu_sgd_update(void *param, const void *grad, float *momentum_buffer, size_t n, gc_dtype dtype,
                       const gc_sgd_hyper *hyper) {
    for (size_t i = 0; i < n; i++) {
        double p = gc_load(param, dtype, i), g = gc_load(grad, dtype, i);
        float *buf = momentum_buffer ? &momentum_buffer[i] : NULL;
        gc_store(param, dtype, i,
                 dtype == GC_F64 ? gc_sgd_element_double(p, g, buf, *hyper)
                                 : gc_sgd_element_float((float)p, (float)g, buf, *hyper));
    }
}

/* param, grad [n] of dtype; exp_avg, exp_avg_sq f32 [n] */
void gc_cpu_adamw_update(void *param, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n, gc_dtype dtype,
                         const gc_adamw_hyper *hyper) {
    for (size_t i = 0; i < n; i++) {
        double p = gc_load(param, dtype, i), g = gc_load(grad, dtype, i);
        gc_store(param, dtype, i,
                 dtype == GC_F64 ? gc_adamw_element_double(p, g, &exp_avg[i], &exp_avg_sq[i], *hyper)
                                 : gc_adamw_element_float((float)p, (float)g, &exp_avg[i], &exp_avg_sq[i], *hyper));
    }
}
