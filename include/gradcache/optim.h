/* Optimizers, gradient clipping and learning-rate schedules.
 *
 * An optimizer updates the parameters of a gc_param_list (gradcache/nn.h) in place from
 * their gradients, skipping any parameter without one. Its state (momentum, Adam's
 * moments) is kept in f32 whatever the parameters' dtype, one tensor per parameter on the
 * parameter's device, allocated at the first step. The optimizer holds references to the
 * parameters, so the list may be freed after init.
 *
 * A step allocates every missing state before it updates anything: it returns GC_OK, or
 * the allocation error with no parameter and no state changed. The update of an element is
 * computed in f32 (f64 for f64 parameters) from hyper-parameters rounded to f32, and the
 * result is rounded once into the parameter's dtype; CPU and CUDA agree bit for bit. A
 * gradient that does not match its parameter is a programmer error naming the parameter.
 * lr may be changed between steps (see gc_lr_at). */
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
    int64_t step;           /* steps taken (bias correction uses step after the increment); one
                             * count for all parameters, where PyTorch counts per parameter */
} gc_adamw;
gc_status gc_adamw_init(gc_adamw *opt, const gc_param_list *params, double lr, double beta1, double beta2, double eps,
                        double weight_decay);
gc_status gc_adamw_step(gc_adamw *opt);
/* Appends the state as named tensors ("<prefix>.exp_avg.<param>", "<prefix>.exp_avg_sq.<param>",
 * or without "<prefix>." for an empty prefix) for a checkpoint: references to the live
 * moments, so save them before the next step. A parameter with no state yet (no step has
 * seen a gradient for it) has no entries. The step count is kept by the caller (see
 * gradcache/checkpoint.h). */
void gc_adamw_state(const gc_adamw *opt, const char *prefix, gc_param_list *list);
/* The most steps AdamW counts: the bias corrections use the count as a double, exact up to
 * 2^53. A step beyond it is a programmer error; a loaded count beyond it, GC_ERR_FORMAT. */
#define GC_ADAMW_MAX_STEP (INT64_C(1) << 53)
/* Loads state saved by gc_adamw_state from `list` (copies, onto each parameter's device) and
 * sets the step (at most GC_ADAMW_MAX_STEP). A parameter with neither entry gets no state;
 * one entry without the other, or an entry that is not f32 of the parameter's shape, is
 * GC_ERR_FORMAT naming it. On any error nothing is changed. */
gc_status gc_adamw_load_state(gc_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step);
void gc_adamw_free(gc_adamw *opt);

/* --- global gradient-norm clipping ---
 * Scales every gradient by max_norm / (total + 1e-6) (as PyTorch) when the total 2-norm
 * over all of them is larger than max_norm; returns the total before clipping. Each
 * gradient's sum of squares is computed in f32 (f64 for f64 gradients; f16 and bf16 are
 * widened to f32 first) and the sums are added in f64. A nan total (a nan gradient, or an
 * allocation failure, whose error is then recorded) scales nothing. */
double gc_clip_grad_norm(const gc_param_list *params, double max_norm);

/* --- learning-rate schedule: linear warm-up, then constant, or linear or cosine decay to min ---
 * The rate of step s (0-based), with W = warmup_steps and T = total_steps:
 *     s < W:                 peak (s + 1) / W   (peak / W at step 0, peak at step W - 1)
 *     CONSTANT, s >= W:      peak               (min and total_steps are not used)
 *     LINEAR, W <= s < T:    peak + (min - peak) t,             t = (s - W) / (T - W)
 *     COSINE, W <= s < T:    min + (peak - min) (1 + cos(pi t)) / 2
 *     LINEAR, COSINE, s >= T: min
 * so a decay starts at peak at step W and would reach min at step T. Unlike Hugging Face's
 * get_*_schedule_with_warmup (peak s / W), step 0 already trains (at peak / W). A negative
 * step or warmup_steps, or total_steps < warmup_steps with a decay, is a programmer error. */
typedef enum gc_lr_decay { GC_LR_CONSTANT, GC_LR_LINEAR, GC_LR_COSINE } gc_lr_decay;
typedef struct gc_lr_schedule {
    double peak;           /* the rate at the end of warm-up */
    double min;            /* the rate at total_steps and after (decays only) */
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
