/* The trainer's AdamW, whole or sharded (see train_optim.h). */
#include "train_optim.h"

#include "gradcache/loss_scaler.h"

gc_status gc_train_optim_init(gc_train_optim *o, const gc_train_dist *dist, const gc_param_list *params, double lr,
                              double weight_decay) {
    *o = (gc_train_optim){.group = dist->group};
    if (dist->ddp && gc_ddp_zero(dist->ddp) >= GC_ZERO_1) {
        o->sharded = gc_zero_adamw_new(dist->ddp, lr, 0.9, 0.999, 1e-8, weight_decay);
        return GC_OK;
    }
    gc_status status = gc_adamw_init(&o->whole, params, lr, 0.9, 0.999, 1e-8, weight_decay);
    o->whole_ready = status == GC_OK;
    return status;
}

void gc_train_optim_free(gc_train_optim *o) {
    if (o->whole_ready) gc_adamw_free(&o->whole);
    gc_zero_adamw_free(o->sharded);
    *o = (gc_train_optim){0};
}

gc_adamw *gc_train_optim_adamw(gc_train_optim *o) { return o->sharded ? gc_zero_adamw_adamw(o->sharded) : &o->whole; }

gc_status gc_train_optim_check_grads(gc_train_optim *o, const gc_param_list *params, bool *found_inf) {
    if (o->sharded) return gc_zero_adamw_check_grads(o->sharded, found_inf);
    gc_status status = gc_loss_scaler_check_grads(params, found_inf);
    /* every rank skips the same steps */
    if (status == GC_OK && o->group) status = gc_dist_any(o->group, found_inf);
    return status;
}

double gc_train_optim_clip_grad_scale(gc_train_optim *o, const gc_param_list *params, double max_norm,
                                      double *grad_scale) {
    return o->sharded ? gc_zero_adamw_clip_grad_scale(o->sharded, max_norm, grad_scale)
                      : gc_clip_grad_scale(params, max_norm, grad_scale);
}

gc_status gc_train_optim_step_scaled(gc_train_optim *o, double grad_scale) {
    return o->sharded ? gc_zero_adamw_step_scaled(o->sharded, grad_scale) : gc_adamw_step_scaled(&o->whole, grad_scale);
}

gc_status gc_train_optim_state(gc_train_optim *o, const char *prefix, gc_param_list *list) {
    if (o->sharded) return gc_zero_adamw_state(o->sharded, prefix, 0, list);
    if (!o->group || gc_dist_rank(o->group) == 0) gc_adamw_state(&o->whole, prefix, list);
    return GC_OK;
}

gc_status gc_train_optim_load_state(gc_train_optim *o, const char *prefix, const gc_param_list *list, int64_t step) {
    return o->sharded ? gc_zero_adamw_load_state(o->sharded, prefix, list, step)
                      : gc_adamw_load_state(&o->whole, prefix, list, step);
}
