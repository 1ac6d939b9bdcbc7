/* What the optimizers (nn/sgd.c, nn/adamw.c) share: their own copy of the parameter list,
 * per-parameter f32 state allocated at the parameter's first step, and the frame of a step
 * (checked gradients, all state allocated before anything is updated, no-grad mode). */
#ifndef GC_NN_OPTIMIZER_H
#define GC_NN_OPTIMIZER_H

#include <stdbool.h>

#include "gradcache/nn.h"

/* The most state tensors a parameter has (AdamW's two moments). */
#define GC_OPTIM_MAX_STATES 2

/* Copies `params` into `own`: new references, the same names and no_decay flags. */
void gc_optim_copy_params(gc_param_list *own, const gc_param_list *params);
/* An array of `count` NULL state tensors (host memory; running out of it is fatal). */
gc_tensor **gc_optim_state_array(int count);
/* Releases the `count` states of an array (NULL entries included) and the array. */
void gc_optim_free_states(gc_tensor **states, int count);

/* One parameter's update: grad matches param->tensor (shape, dtype, device); state[k]
 * (k < the step's n_states) are its f32 states shaped like it, fresh when this step
 * allocated them. ctx is the optimizer's hyper-parameters for this step. */
typedef void (*gc_optim_update)(const void *ctx, const gc_param *param, const gc_tensor *grad, gc_tensor *const *state,
                                bool fresh);

/* One step of an optimizer named `op` over `params`: checks every gradient against its
 * parameter (a mismatch is fatal, naming the parameter), gives every parameter that has a
 * gradient and no state yet its zero states (states[k][i] for k < n_states), then, in
 * no-grad mode, calls update for each parameter that has a gradient (the others are
 * skipped). Returns GC_OK, or an allocation error after releasing what this call allocated:
 * a failed step changes nothing. */
gc_status gc_optim_step(const char *op, const gc_param_list *params, gc_tensor **const *states, int n_states,
                        gc_optim_update update, const void *ctx);

#endif
