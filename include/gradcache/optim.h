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
 * lr may be changed between steps (see gc_lr_at).
 *
 * Master weights (apex's O2, the usual recipe for training in f16): an f16 or bf16 parameter
 * gets an f32 master copy at its first step (its value widened, exactly). From then on each
 * step updates the master in f32 and rounds the result into the parameter, in one fused pass
 * per tensor, so an update smaller than half a unit in the last place of the 16-bit weight
 * still accumulates instead of being rounded away. The master is the parameter's true value:
 * code that sets a parameter after its first step must set the master too (checkpoints save
 * and load both, see gc_adamw_state). master_weights, true after init, may be set false
 * before the first step to round every update straight into the 16-bit parameter.
 *
 * A scaled step (gc_*_step_scaled) multiplies every gradient by grad_scale in f32 inside that
 * same pass: the unscaling of a loss scaler (gradcache/loss_scaler.h) and a clipping
 * coefficient (gc_clip_grad_scale), folded in, so that a 16-bit gradient never has to be
 * unscaled in place, where its small values would flush to zero. grad_scale = 1 is the plain
 * step, bit for bit. */
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
    gc_tensor **master;    /* [params.count] f32 masters of the f16 and bf16 parameters, NULL until
                            * their first step and for the others */
    double lr, momentum_factor, weight_decay; /* weight decay added to the gradient (L2) */
    bool master_weights;   /* keep f32 masters (see the top of this file) */
} gc_sgd;
gc_status gc_sgd_init(gc_sgd *opt, const gc_param_list *params, double lr, double momentum, double weight_decay);
gc_status gc_sgd_step(gc_sgd *opt);
/* The step with every gradient multiplied by grad_scale (finite, >= 0) first. */
gc_status gc_sgd_step_scaled(gc_sgd *opt, double grad_scale);
void gc_sgd_free(gc_sgd *opt);

/* --- AdamW (Loshchilov and Hutter): decoupled weight decay, bias-corrected moments --- */
typedef struct gc_adamw {
    gc_param_list params;   /* the optimizer's own references */
    gc_tensor **exp_avg;    /* [params.count] f32 first moments, NULL until the first step */
    gc_tensor **exp_avg_sq; /* [params.count] f32 second moments */
    gc_tensor **master;     /* [params.count] f32 masters of the f16 and bf16 parameters, NULL until
                             * their first step and for the others */
    double lr, beta1, beta2, eps, weight_decay; /* weight decay skipped for no_decay params */
    int64_t step;           /* steps taken (bias correction uses step after the increment); one
                             * count for all parameters, where PyTorch counts per parameter */
    bool master_weights;    /* keep f32 masters (see the top of this file) */
} gc_adamw;
gc_status gc_adamw_init(gc_adamw *opt, const gc_param_list *params, double lr, double beta1, double beta2, double eps,
                        double weight_decay);
gc_status gc_adamw_step(gc_adamw *opt);
/* The step with every gradient multiplied by grad_scale (finite, >= 0) first. */
gc_status gc_adamw_step_scaled(gc_adamw *opt, double grad_scale);
/* Appends the state as named tensors ("<prefix>.exp_avg.<param>", "<prefix>.exp_avg_sq.<param>"
 * and, for a parameter with a master, "<prefix>.master.<param>"; without "<prefix>." for an
 * empty prefix) for a checkpoint: references to the live tensors, so save them before the
 * next step. A parameter with no state yet (no step has seen a gradient for it) has no
 * entries. The step count is kept by the caller (see gradcache/checkpoint.h). */
void gc_adamw_state(const gc_adamw *opt, const char *prefix, gc_param_list *list);
/* The names gc_adamw_state gives parameter `param`'s state, in this order: the first moment,
 * the second, the master. A name longer than GC_PARAM_NAME_MAX - 1 is a programmer error. */
#define GC_ADAMW_STATE_KINDS 3
void gc_adamw_state_names(const char *prefix, const char *param, char names[GC_ADAMW_STATE_KINDS][GC_PARAM_NAME_MAX]);
/* The most steps AdamW counts: the bias corrections use the count as a double, exact up to
 * 2^53. A step beyond it is a programmer error; a loaded count beyond it, GC_ERR_FORMAT. */
#define GC_ADAMW_MAX_STEP (INT64_C(1) << 53)
/* Loads state saved by gc_adamw_state from `list` (copies, onto each parameter's device) and
 * sets the step (at most GC_ADAMW_MAX_STEP). A parameter with no entry gets no state.
 * GC_ERR_FORMAT names the entry when one moment comes without the other, when an entry is not
 * f32 of the parameter's shape, when an f16 or bf16 parameter with moments has no master (and
 * master_weights is on), or when a parameter of another dtype has one: the state was saved in
 * another precision. The parameters themselves are the caller's to load. On any error nothing
 * is changed. */
gc_status gc_adamw_load_state(gc_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step);
void gc_adamw_free(gc_adamw *opt);

/* --- global gradient-norm clipping ---
 * Scales every gradient by max_norm / (total + 1e-6) (as PyTorch) when the total 2-norm
 * over all of them is larger than max_norm; returns the total before clipping. Each
 * gradient's sum of squares is computed in f32 (f64 for f64 gradients; f16 and bf16 are
 * widened to f32 first) and the sums are added in f64. A nan total (a nan gradient, or an
 * allocation failure, whose error is then recorded) scales nothing. */
double gc_clip_grad_norm(const gc_param_list *params, double max_norm);
/* Clipping folded into a scaled step's grad_scale, for gradients that carry a loss scale: the
 * total is the norm gc_clip_grad_norm computes, times *grad_scale (the norm of the gradients
 * the step will use); when it is larger than max_norm, *grad_scale is multiplied by
 * max_norm / (total + 1e-6). The gradients are left as they are. Returns the total (nan, and
 * *grad_scale unchanged, as gc_clip_grad_norm). */
double gc_clip_grad_scale(const gc_param_list *params, double max_norm, double *grad_scale);

/* The pieces of the above, for gradients split over processes (a ZeRO optimizer's shards,
 * gradcache/zero.h), whose sums of squares add: the sum of squares whose root is
 * gc_clip_grad_norm's total (nan after a failed allocation), and the clipping of
 * gc_clip_grad_scale given a total (the norm of the gradients the step will use). */
double gc_grad_squared_sum(const gc_param_list *params);
void gc_clip_scale_for_norm(double total, double max_norm, double *grad_scale);

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
