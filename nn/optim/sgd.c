/* SGD with momentum and L2 weight decay, as PyTorch's torch.optim.SGD (no dampening, no
 * Nesterov): one fused update per parameter (gc_sgd_update_, tensor/op_internal.h), which
 * updates an f16 or bf16 parameter's f32 master and writes the parameter back in the same
 * pass. */
#include "gradcache/optim.h"
#include "optimizer.h"
#include "tensor/op_internal.h"

gc_status gc_sgd_init(gc_sgd *opt, const gc_param_list *params, double lr, double momentum, double weight_decay) {
    if (!(lr >= 0 && momentum >= 0 && weight_decay >= 0)) /* written so that nan fails too */
        gc_fatal("sgd_init: lr %g, momentum %g and weight_decay %g must all be >= 0", lr, momentum, weight_decay);
    *opt = (gc_sgd){.lr = lr, .momentum_factor = momentum, .weight_decay = weight_decay, .master_weights = true};
    gc_optim_copy_params(&opt->params, params);
    opt->momentum = gc_optim_state_array(opt->params.count);
    opt->master = gc_optim_state_array(opt->params.count);
    return GC_OK;
}

/* ctx: the step's gc_sgd_hyper; state[0] the momentum buffer when the momentum is not 0. */
static void sgd_update(const void *ctx, const gc_param *param, const gc_tensor *grad, gc_tensor *const *state,
                       gc_tensor *master, bool fresh) {
    gc_sgd_hyper hyper = *(const gc_sgd_hyper *)ctx;
    hyper.first_step = fresh;
    gc_sgd_update_(param->tensor, master, grad, hyper.momentum != 0 ? state[0] : NULL, &hyper);
}

gc_status gc_sgd_step_scaled(gc_sgd *opt, double grad_scale) {
    gc_optim_check_grad_scale("sgd_step", grad_scale);
    gc_sgd_hyper hyper = {.lr = (float)opt->lr, .momentum = (float)opt->momentum_factor,
                          .weight_decay = (float)opt->weight_decay, .grad_scale = (float)grad_scale};
    /* Without momentum there is no buffer to keep. */
    gc_optim_tensors tensors = {&opt->momentum, hyper.momentum != 0 ? 1 : 0, opt->master, opt->master_weights};
    return gc_optim_step("sgd", &opt->params, &tensors, sgd_update, &hyper);
}

gc_status gc_sgd_step(gc_sgd *opt) { return gc_sgd_step_scaled(opt, 1); }

void gc_sgd_free(gc_sgd *opt) {
    gc_optim_free_states(opt->momentum, opt->params.count);
    gc_optim_free_states(opt->master, opt->params.count);
    gc_param_list_free(&opt->params);
    *opt = (gc_sgd){0};
}
