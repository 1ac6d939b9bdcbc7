/* Optimizers, gradient clipping and learning-rate schedules.
 *
 * An optimizer updates the parameters of a gc_param_list (gradcache/nn.h) in place from
 * their gradients, skipping any parameter without one. Its state (momentum, Adam's
 * moments) is kept in f32 whatever the parameters' dtype, one tensor per parameter on the
 * parameter's device, allocated at the first step. The optimizer holds references to the
 * parameters, so the list may be freed after init. */
#ifndef GRADCACHE_OPTIM_H
#define GRADCACHE_OPTIM_H

#include <stdint.h>

#include "gradcache/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- SGD with momentum (PyTorch's form: buf = momentum buf + g; p -= lr buf) --- */
typedef struct gc_sgd {
    gc_param_list params;  /* the optimizer's own references */
    gc_tensor **momentum;  /* [params.count] f32 buffers, NULL until the first step */
    double lr, momentum_factor, weight_decay; /* weight decay added to the gradient (L2) */
} gc_sgd;
gc_status gc_sgd_init(gc_sgd *opt, const gc_param_list *params, double lr, double momentum, double weight_decay);
gc_status gc_sgd_step(gc_sgd *opt);
void gc_sgd_free(gc_sgd *opt);

/* --- AdamW (Loshchilov and Hutter): decoupled weight decay, bias-corrected moments --- */
typedef struct gc_adamw {
    gc_param_list params;   /* the optimizer's own references */
    gc_tensor **exp_avg;    /* [params.count] f32 first moments, NULL until the first step */
    gc_tensor **exp_avg_sq; /* [params.count] f32 second moments */
    double lr, beta1, beta2, eps, weight_decay; /* weight decay skipped for no_decay params */
    int64_t step;           /* steps taken (bias correction uses step after the increment) */
} gc_adamw;
gc_status gc_adamw_init(gc_adamw *opt, const gc_param_list *params, double lr, double beta1, double beta2, double eps,
                        double weight_decay);
gc_status gc_adamw_step(gc_adamw *opt);
/* Appends the state as named tensors ("<prefix>.exp_avg.<param>", "<prefix>.exp_avg_sq.<param>")
 * for a checkpoint; the step count is kept by the caller (see gradcache/checkpoint.h). */
void gc_adamw_state(const gc_adamw *opt, const char *prefix, gc_param_list *list);
/* Loads state saved by gc_adamw_state from `list` (shapes must match) and sets the step. */
gc_status gc_adamw_load_state(gc_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step);
void gc_adamw_free(gc_adamw *opt);

/* --- global gradient-norm clipping ---
 * Scales every gradient by max_norm / total when the total 2-norm over all of them is
 * larger; returns the total before clipping (computed in f64 over the f32 squares). */
double gc_clip_grad_norm(const gc_param_list *params, double max_norm);

/* --- learning-rate schedule: linear warm-up, then linear or cosine decay to min --- */
typedef enum gc_lr_decay { GC_LR_CONSTANT, GC_LR_LINEAR, GC_LR_COSINE } gc_lr_decay;
typedef struct gc_lr_schedule {
    double peak;           /* the rate at the end of warm-up */
    double min;            /* the rate at total_steps and after */
    int64_t warmup_steps;  /* rises linearly from peak / warmup_steps at step 0 */
    int64_t total_steps;
    gc_lr_decay decay;
} gc_lr_schedule;
/* The rate for step (0-based). */
double gc_lr_at(const gc_lr_schedule *schedule, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
