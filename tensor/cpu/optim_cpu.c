/* The fused optimizer updates on the CPU (the arithmetic: ../optim_impl.h, shared with
 * CUDA). Each element is loaded exactly as a double, updated in its working precision
 * (f64 for f64 parameters, f32 otherwise) and stored back by gc_store, which rounds it once
 * into the parameter's dtype. */
#include "../optim_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

/* An update's arguments; the threads split the elements, each updated alone. */
typedef struct update_job {
    void *param;
    const void *grad;
    float *state0, *state1; /* sgd: the momentum buffer (or NULL); adamw: the two moments */
    gc_dtype dtype;
    const gc_sgd_hyper *sgd;
    const gc_adamw_hyper *adamw;
} update_job;

static void sgd_range(void *arg, int64_t begin, int64_t end) {
    const update_job *job = arg;
    void *param = job->param;
    const void *grad = job->grad;
    float *momentum_buffer = job->state0;
    gc_dtype dtype = job->dtype;
    const gc_sgd_hyper *hyper = job->sgd;
    for (size_t i = (size_t)begin; i < (size_t)end; i++) {
        double p = gc_load(param, dtype, i), g = gc_load(grad, dtype, i);
        float *buf = momentum_buffer ? &momentum_buffer[i] : NULL;
        gc_store(param, dtype, i,
                 dtype == GC_F64 ? gc_sgd_element_double(p, g, buf, *hyper)
                                 : gc_sgd_element_float((float)p, (float)g, buf, *hyper));
    }
}

/* param, grad [n] of dtype; momentum_buffer f32 [n], or NULL when the momentum is 0 */
void gc_cpu_sgd_update(void *param, const void *grad, float *momentum_buffer, size_t n, gc_dtype dtype,
                       const gc_sgd_hyper *hyper) {
    update_job job = {param, grad, momentum_buffer, NULL, dtype, hyper, NULL};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 4, sgd_range, &job);
}

static void adamw_range(void *arg, int64_t begin, int64_t end) {
    const update_job *job = arg;
    void *param = job->param;
    const void *grad = job->grad;
    float *exp_avg = job->state0, *exp_avg_sq = job->state1;
    gc_dtype dtype = job->dtype;
    const gc_adamw_hyper *hyper = job->adamw;
    for (size_t i = (size_t)begin; i < (size_t)end; i++) {
        double p = gc_load(param, dtype, i), g = gc_load(grad, dtype, i);
        gc_store(param, dtype, i,
                 dtype == GC_F64 ? gc_adamw_element_double(p, g, &exp_avg[i], &exp_avg_sq[i], *hyper)
                                 : gc_adamw_element_float((float)p, (float)g, &exp_avg[i], &exp_avg_sq[i], *hyper));
    }
}

/* param, grad [n] of dtype; exp_avg, exp_avg_sq f32 [n] */
void gc_cpu_adamw_update(void *param, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n, gc_dtype dtype,
                         const gc_adamw_hyper *hyper) {
    update_job job = {param, grad, exp_avg, exp_avg_sq, dtype, NULL, hyper};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 4, adamw_range, &job);
}
