/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cuda.h"

extern "C" void gc_cuda_sgd_update(void *param, const void *grad, float *momentum_buffer, size_t n, gc_dtype dtype,
                       const gc_sgd_hyper *hyper) {
    (void)param; (void)grad; (void)momentum_buffer; (void)n; (void)dtype; (void)hyper;
    gc_fatal("sgd_update: not implemented");
}
extern "C" void gc_cuda_adamw_update(void *param, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n, gc_dtype dtype,
                         const gc_adamw_hyper *hyper) {
    (void)param; (void)grad; (void)exp_avg; (void)exp_avg_sq; (void)n; (void)dtype; (void)hyper;
    gc_fatal("adamw_update: not implemented");
}
