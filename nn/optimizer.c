/* The pieces SGD and AdamW share (see optimizer.h). */
#include <stdlib.h>

#include "gradcache/autograd.h"
#include "optimizer.h"

void gc_optim_copy_params(gc_param_list *own, const gc_param_list *params) {
    *own = (gc_param_list){0};
    for (int i = 0; i < params->count; i++)
        gc_param_list_add(own, "", params->items[i].name, params->items[i].tensor, params->items[i].no_decay);
}

gc_tensor **gc_optim_state_array(int count) {
    gc_tensor **states = calloc((size_t)count + 1, sizeof *states); /* + 1: calloc(0) may return NULL */
    if (!states) gc_fatal("optimizer: out of host memory for the state of %d parameters", count);
    return states;
}

void gc_optim_free_states(gc_tensor **states, int count) {
    if (!states) return;
    for (int i = 0; i < count; i++) gc_tensor_release(states[i]);
    free(states);
}

/* The gradient of `param`, or NULL when it has none; stops the program when the gradient
 * does not match the parameter (a kernel would read past one of them). */
static const gc_tensor *checked_grad(const char *op, const gc_param *param) {
    const gc_tensor *p = param->tensor, *g = gc_grad(p);
    if (g && (!gc_same_shape(p, g) || g->dtype != p->dtype || !gc_device_equal(g->device, p->device))) {
        char tp[128], tg[128];
        gc_fatal("%s: the gradient %s of parameter '%s' does not match the parameter %s", op,
                 gc_tensor_str(g, tg, sizeof tg), param->name, gc_tensor_str(p, tp, sizeof tp));
    }
    return g;
}

/* Releases the states of the parameters marked fresh, leaving them NULL again. */
static void release_fresh(const gc_param_list *params, gc_tensor **const *states, int n_states, const bool *fresh) {
    for (int i = 0; i < params->count; i++)
        for (int k = 0; k < n_states && fresh[i]; k++) {
            gc_tensor_release(states[k][i]);
            states[k][i] = NULL;
        }
}

/* Zero states for every parameter with a gradient and none yet, marked in fresh[]; all or
 * nothing (a parameter's states are all present or all NULL). */
static gc_status allocate_missing(const char *op, const gc_param_list *params, gc_tensor **const *states,
                                  int n_states, bool *fresh) {
    for (int i = 0; i < params->count; i++) {
        const gc_tensor *p = params->items[i].tensor;
        if (!checked_grad(op, &params->items[i]) || n_states == 0 || states[0][i]) continue;
        fresh[i] = true;
        for (int k = 0; k < n_states; k++) {
            states[k][i] = gc_zeros(p->ndim, p->shape, GC_F32, p->device);
            if (!states[k][i]) {
                gc_status status = gc_last_status();
                release_fresh(params, states, n_states, fresh);
                return status;
            }
        }
    }
    return GC_OK;
}

gc_status gc_optim_step(const char *op, const gc_param_list *params, gc_tensor **const *states, int n_states,
                        gc_optim_update update, const void *ctx) {
    if (n_states > GC_OPTIM_MAX_STATES)
        gc_fatal("%s: %d states per parameter, at most %d", op, n_states, GC_OPTIM_MAX_STATES);
    bool *fresh = calloc((size_t)params->count + 1, sizeof *fresh);
    if (!fresh) gc_fatal("%s: out of host memory for a step over %d parameters", op, params->count);
    gc_status status = allocate_missing(op, params, states, n_states, fresh);
    if (status == GC_OK) {
        bool previous = gc_set_grad_enabled(false);
        for (int i = 0; i < params->count; i++) {
            const gc_tensor *grad = gc_grad(params->items[i].tensor);
            gc_tensor *state[GC_OPTIM_MAX_STATES] = {0};
            for (int k = 0; k < n_states; k++) state[k] = states[k][i];
            if (grad) update(ctx, &params->items[i], grad, state, fresh[i]);
        }
        gc_set_grad_enabled(previous);
    }
    free(fresh);
    return status;
}
