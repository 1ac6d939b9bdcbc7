/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_sgd_update(void *param, const void *grad, float *momentum_buffer, size_t n, gc_dtype dtype,
                       const gc_sgd_hyper *hyper) {
    (void)param; (void)grad; (void)momentum_buffer; (void)n; (void)dtype; (void)hyper;
    gc_fatal("sgd_update: not implemented");
}
void gc_cpu_adamw_update(void *param, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n, gc_dtype dtype,
                         const gc_adamw_hyper *hyper) {
    (void)param; (void)grad; (void)exp_avg; (void)exp_avg_sq; (void)n; (void)dtype; (void)hyper;
    gc_fatal("adamw_update: not implemented");
}
