/* What the optimizers (nn/optim/sgd.c, nn/optim/adamw.c) share: their own copy of the parameter list,
 * per-parameter f32 state allocated at the parameter's first step, f32 master copies of the
 * f16 and bf16 parameters, and the frame of a step (checked gradients, everything allocated
 * before anything is updated, no-grad mode). */
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
/* True for the dtypes whose parameters get an f32 master copy: f16 and bf16. */
bool gc_optim_has_master(gc_dtype dtype);
/* 0 <= grad_scale < inf, or the program stops naming `op`. */
void gc_optim_check_grad_scale(const char *op, double grad_scale);

/* One parameter's update: grad matches param->tensor (shape, dtype, device); state[k]
 * (k < the step's n_states) are its f32 states shaped like it, fresh when this step
 * allocated them; master is its f32 master copy, or NULL when it has none. ctx is the
 * optimizer's hyper-parameters for this step. */
typedef void (*gc_optim_update)(const void *ctx, const gc_param *param, const gc_tensor *grad, gc_tensor *const *state,
                                gc_tensor *master, bool fresh);

/* The per-parameter tensors a step reads and fills in: states[k][i] (k < n_states) and
 * masters[i], arrays of params->count entries, NULL until made. */
typedef struct gc_optim_tensors {
    gc_tensor **const *states;
    int n_states;
    gc_tensor **masters;
    bool make_masters; /* give f16 and bf16 parameters a master at their first step */
} gc_optim_tensors;

/* One step of an optimizer named `op` over `params`: checks every gradient against its
 * parameter (a mismatch is fatal, naming the parameter), gives every parameter that has a
 * gradient and no state yet its zero states and (make_masters, f16 and bf16 only) its master,
 * the parameter widened exactly to f32; then, in no-grad mode, calls update for each
 * parameter that has a gradient (the others are skipped). Returns GC_OK, or an allocation
 * error after releasing what this call allocated: a failed step changes nothing. */
gc_status gc_optim_step(const char *op, const gc_param_list *params, const gc_optim_tensors *tensors,
                        gc_optim_update update, const void *ctx);

#endif
