/* The pieces SGD and AdamW share (see optimizer.h). */
#include <math.h>
#include <stdlib.h>

#include "gradcache/autograd.h"
#include "gradcache/memory.h"
#include "gradcache/ops.h"
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

bool gc_optim_has_master(gc_dtype dtype) { return dtype == GC_F16 || dtype == GC_BF16; }

void gc_optim_check_grad_scale(const char *op, double grad_scale) {
    if (!(grad_scale >= 0 && isfinite(grad_scale))) gc_fatal("%s: grad_scale %g is not finite and >= 0", op, grad_scale);
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

/* What one call made, per parameter, so that a failure can take it back. */
typedef struct made {
    bool *states, *master;
} made;

/* Releases what this call made, leaving those entries NULL again. */
static void release_made(const gc_param_list *params, const gc_optim_tensors *t, const made *m) {
    for (int i = 0; i < params->count; i++) {
        for (int k = 0; k < t->n_states && m->states[i]; k++) {
            gc_tensor_release(t->states[k][i]);
            t->states[k][i] = NULL;
        }
        if (m->master[i]) {
            gc_tensor_release(t->masters[i]);
            t->masters[i] = NULL;
        }
    }
}

/* Parameter i's missing zero states (all or none) and master, recorded in m. */
static gc_status make_missing(const gc_tensor *p, int i, const gc_optim_tensors *t, made *m) {
    if (t->n_states > 0 && !t->states[0][i]) {
        m->states[i] = true;
        for (int k = 0; k < t->n_states; k++)
            if (!(t->states[k][i] = gc_zeros(p->ndim, p->shape, GC_F32, p->device))) return gc_last_status();
    }
    if (t->make_masters && gc_optim_has_master(p->dtype) && !t->masters[i]) {
        m->master[i] = true;
        if (!(t->masters[i] = gc_cast(p, GC_F32))) return gc_last_status(); /* exact: f32 holds every value */
    }
    return GC_OK;
}

/* Everything missing for every parameter with a gradient; all or nothing. */
static gc_status allocate_missing(const char *op, const gc_param_list *params, const gc_optim_tensors *t, made *m) {
    bool previous = gc_set_grad_enabled(false); /* a master is a plain copy, outside any graph */
    gc_memory_role role = gc_memory_set_role(GC_MEMORY_OPTIMIZER);
    gc_status status = GC_OK;
    for (int i = 0; i < params->count && status == GC_OK; i++)
        if (checked_grad(op, &params->items[i])) status = make_missing(params->items[i].tensor, i, t, m);
    gc_memory_set_role(role);
    gc_set_grad_enabled(previous);
    if (status != GC_OK) release_made(params, t, m);
    return status;
}

gc_status gc_optim_step(const char *op, const gc_param_list *params, const gc_optim_tensors *tensors,
                        gc_optim_update update, const void *ctx) {
    if (tensors->n_states > GC_OPTIM_MAX_STATES)
        gc_fatal("%s: %d states per parameter, at most %d", op, tensors->n_states, GC_OPTIM_MAX_STATES);
    made m = {calloc((size_t)params->count + 1, sizeof(bool)), calloc((size_t)params->count + 1, sizeof(bool))};
    if (!m.states || !m.master) gc_fatal("%s: out of host memory for a step over %d parameters", op, params->count);
    gc_status status = allocate_missing(op, params, tensors, &m);
    if (status == GC_OK) {
        bool previous = gc_set_grad_enabled(false);
        for (int i = 0; i < params->count; i++) {
            const gc_tensor *grad = gc_grad(params->items[i].tensor);
            gc_tensor *state[GC_OPTIM_MAX_STATES] = {0};
            for (int k = 0; k < tensors->n_states; k++) state[k] = tensors->states[k][i];
            if (grad) update(ctx, &params->items[i], grad, state, tensors->masters[i], m.states[i]);
        }
        gc_set_grad_enabled(previous);
    }
    free(m.states);
    free(m.master);
    return status;
}
