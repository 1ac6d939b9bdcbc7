/* The fused optimizer updates on the CPU (the arithmetic: ../optim_impl.h, shared with
 * CUDA). Each element is loaded exactly as a double, updated in its working precision
 * (f64 for f64 parameters, f32 otherwise) and stored back by gc_store, which rounds it once
 * into the parameter's dtype. A parameter with an f32 master copy is read from the master,
 * and the new value goes into the master before it is rounded into the parameter. The
 * threads split the elements, each updated alone. */
#include "../optim_impl.h"
#include "adamw_cpu.h"
#include "cpu_isa.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

/* An update's arguments. */
typedef struct update_job {
    void *param;            /* [n] of dtype */
    float *master;          /* f32 [n] or NULL */
    const void *grad;       /* [n] of dtype */
    float *state0, *state1; /* f32 [n]; sgd: the momentum buffer (or NULL); adamw: the two moments */
    gc_dtype dtype;
    const gc_sgd_hyper *sgd;
    const gc_adamw_hyper *adamw;
} update_job;

/* Element i of an f32, f16 or bf16 parameter as the update starts from it. */
static float load_working(const update_job *job, size_t i) {
    return job->master ? job->master[i] : (float)gc_load(job->param, job->dtype, i);
}

static void store_updated(const update_job *job, size_t i, float value) {
    if (job->master) job->master[i] = value;
    gc_store(job->param, job->dtype, i, value);
}

static void sgd_range(void *arg, int64_t begin, int64_t end) {
    const update_job *job = arg;
    for (size_t i = (size_t)begin; i < (size_t)end; i++) {
        double g = gc_load(job->grad, job->dtype, i);
        float *buf = job->state0 ? &job->state0[i] : NULL;
        if (job->dtype == GC_F64)
            gc_store(job->param, job->dtype, i,
                     gc_sgd_element_double(gc_load(job->param, job->dtype, i), g, buf, *job->sgd));
        else
            store_updated(job, i, gc_sgd_element_float(load_working(job, i), (float)g, buf, *job->sgd));
    }
}

/* param, grad [n] of dtype; master f32 [n] or NULL; momentum_buffer f32 [n], or NULL when
 * the momentum is 0 */
void gc_cpu_sgd_update(void *param, float *master, const void *grad, float *momentum_buffer, size_t n,
                       gc_dtype dtype, const gc_sgd_hyper *hyper) {
    update_job job = {param, master, grad, momentum_buffer, NULL, dtype, hyper, NULL};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 4, sgd_range, &job);
}

void gc_cpu_adamw_f32_on(gc_cpu_isa isa, float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                         size_t n, const gc_adamw_hyper *hyper) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX2) {
        gc_adamw_f32_loop_avx2(param, grad, exp_avg, exp_avg_sq, n, *hyper);
        return;
    }
#endif
    (void)isa;
    gc_adamw_f32_loop(param, grad, exp_avg, exp_avg_sq, n, *hyper);
}

static void adamw_range(void *arg, int64_t begin, int64_t end) {
    const update_job *job = arg;
    float *exp_avg = job->state0, *exp_avg_sq = job->state1;
    if (job->dtype == GC_F32 && !job->master) { /* the common case, on plain arrays */
        gc_cpu_adamw_f32_on(gc_cpu_isa_selected(), (float *)job->param + begin, (const float *)job->grad + begin,
                            exp_avg + begin, exp_avg_sq + begin, (size_t)(end - begin), job->adamw);
        return;
    }
    for (size_t i = (size_t)begin; i < (size_t)end; i++) {
        double g = gc_load(job->grad, job->dtype, i);
        if (job->dtype == GC_F64)
            gc_store(job->param, job->dtype, i,
                     gc_adamw_element_double(gc_load(job->param, job->dtype, i), g, &exp_avg[i], &exp_avg_sq[i],
                                             *job->adamw));
        else
            store_updated(job, i,
                          gc_adamw_element_float(load_working(job, i), (float)g, &exp_avg[i], &exp_avg_sq[i],
                                                 *job->adamw));
    }
}

/* param, grad [n] of dtype; master f32 [n] or NULL; exp_avg, exp_avg_sq f32 [n] */
void gc_cpu_adamw_update(void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                         gc_dtype dtype, const gc_adamw_hyper *hyper) {
    update_job job = {param, master, grad, exp_avg, exp_avg_sq, dtype, NULL, hyper};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS / 4, adamw_range, &job);
}
