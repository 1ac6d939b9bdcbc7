/* The fused optimizer updates on the CPU (the arithmetic: ../optim_impl.h, shared with
 * CUDA). Each element is loaded exactly as a double, updated in its working precision
 * (f64 for f64 parameters, f32 otherwise) and stored back by gc_store, which rounds it once
 * into the parameter's dtype. A parameter with an f32 master copy is read from the master,
 * and the new value goes into the master before it is rounded into the parameter. */
#include "../optim_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"

/* Element i of an f32, f16 or bf16 parameter as the update starts from it. */
static float load_working(const void *param, const float *master, gc_dtype dtype, size_t i) {
    return master ? master[i] : (float)gc_load(param, dtype, i);
}

static void store_updated(void *param, float *master, gc_dtype dtype, size_t i, float value) {
    if (master) master[i] = value;
    gc_store(param, dtype, i, value);
}

/* param, grad [n] of dtype; master f32 [n] or NULL; momentum_buffer f32 [n], or NULL when
 * the momentum is 0 */
void gc_cpu_sgd_update(void *param, float *master, const void *grad, float *momentum_buffer, size_t n,
                       gc_dtype dtype, const gc_sgd_hyper *hyper) {
    for (size_t i = 0; i < n; i++) {
        double g = gc_load(grad, dtype, i);
        float *buf = momentum_buffer ? &momentum_buffer[i] : NULL;
        if (dtype == GC_F64)
            gc_store(param, dtype, i, gc_sgd_element_double(gc_load(param, dtype, i), g, buf, *hyper));
        else
            store_updated(param, master, dtype, i,
                          gc_sgd_element_float(load_working(param, master, dtype, i), (float)g, buf, *hyper));
    }
}

/* param, grad [n] of dtype; master f32 [n] or NULL; exp_avg, exp_avg_sq f32 [n] */
void gc_cpu_adamw_update(void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                         gc_dtype dtype, const gc_adamw_hyper *hyper) {
    for (size_t i = 0; i < n; i++) {
        double g = gc_load(grad, dtype, i);
        if (dtype == GC_F64)
            gc_store(param, dtype, i,
                     gc_adamw_element_double(gc_load(param, dtype, i), g, &exp_avg[i], &exp_avg_sq[i], *hyper));
        else
            store_updated(param, master, dtype, i,
                          gc_adamw_element_float(load_working(param, master, dtype, i), (float)g, &exp_avg[i],
                                                 &exp_avg_sq[i], *hyper));
    }
}
