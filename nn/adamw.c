/* AdamW (Loshchilov and Hutter, "Decoupled Weight Decay Regularization"), as PyTorch's
 * torch.optim.AdamW: one fused kernel per parameter (tensor/backend.h, adamw_update), and
 * the moments as named tensors for checkpoints. */
#include <math.h>
#include <stdio.h>

#include "gradcache/optim.h"
#include "optimizer.h"
#include "tensor/backend.h"

gc_status gc_adamw_init(gc_adamw *opt, const gc_param_list *params, double lr, double beta1, double beta2, double eps,
                        double weight_decay) {
    /* Written so that nan fails every test. */
    if (!(lr >= 0 && beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps >= 0 && weight_decay >= 0))
        gc_fatal("adamw_init: lr %g, eps %g and weight_decay %g must be >= 0 and beta1 %g, beta2 %g in [0, 1)", lr,
                 eps, weight_decay, beta1, beta2);
    *opt = (gc_adamw){.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay};
    gc_optim_copy_params(&opt->params, params);
    opt->exp_avg = gc_optim_state_array(opt->params.count);
    opt->exp_avg_sq = gc_optim_state_array(opt->params.count);
    return GC_OK;
}

/* ctx: the step's gc_adamw_hyper; state[0] and state[1] the first and second moments. */
static void adamw_update(const void *ctx, const gc_param *param, const gc_tensor *grad, gc_tensor *const *state,
                         bool fresh) {
    (void)fresh; /* zero moments are AdamW's start: nothing differs at a first step */
    gc_adamw_hyper hyper = *(const gc_adamw_hyper *)ctx;
    if (param->no_decay) hyper.weight_decay = 0;
    const gc_tensor *p = param->tensor;
    gc_backend_for(p->device)->adamw_update(gc_data(p), gc_data(grad), gc_data(state[0]), gc_data(state[1]),
                                            (size_t)gc_numel(p), p->dtype, &hyper);
}

gc_status gc_adamw_step(gc_adamw *opt) {
    if (opt->step >= GC_ADAMW_MAX_STEP)
        gc_fatal("adamw_step: step %lld would pass the largest count, 2^53", (long long)opt->step);
    int64_t step = opt->step + 1;
    float beta1 = (float)opt->beta1, beta2 = (float)opt->beta2;
    /* The bias corrections come from the f32 betas the kernel mixes with, so that at the
     * first step m / bc1 is g itself (1 - b1 is exact in f32), as the algorithm intends. */
    gc_adamw_hyper hyper = {.lr = (float)opt->lr, .beta1 = beta1, .beta2 = beta2, .eps = (float)opt->eps,
                            .weight_decay = (float)opt->weight_decay,
                            .bias_correction1 = (float)(1 - pow(beta1, (double)step)),
                            .bias_correction2 = (float)(1 - pow(beta2, (double)step))};
    gc_tensor **states[] = {opt->exp_avg, opt->exp_avg_sq};
    gc_status status = gc_optim_step("adamw", &opt->params, states, 2, adamw_update, &hyper);
    if (status == GC_OK) opt->step = step;
    return status;
}

/* --- state for checkpoints --- */

static const char *const moment_kinds[2] = {"exp_avg", "exp_avg_sq"};

/* "<prefix>.<kind>.<param>" ("<kind>.<param>" for an empty prefix) into name. */
static void state_name(char name[GC_PARAM_NAME_MAX], const char *op, const char *prefix, const char *kind,
                       const char *param) {
    bool dotted = prefix && *prefix;
    int length = snprintf(name, GC_PARAM_NAME_MAX, "%s%s%s.%s", dotted ? prefix : "", dotted ? "." : "", kind, param);
    if (length >= GC_PARAM_NAME_MAX)
        gc_fatal("%s: the state name of parameter '%s' under prefix '%s' is longer than %d characters", op, param,
                 dotted ? prefix : "", GC_PARAM_NAME_MAX - 1);
}

void gc_adamw_state(const gc_adamw *opt, const char *prefix, gc_param_list *list) {
    gc_tensor **states[] = {opt->exp_avg, opt->exp_avg_sq};
    char name[GC_PARAM_NAME_MAX];
    for (int i = 0; i < opt->params.count; i++) {
        if (!states[0][i]) continue; /* no step has reached this parameter yet */
        for (int k = 0; k < 2; k++) {
            state_name(name, "adamw_state", prefix, moment_kinds[k], opt->params.items[i].name);
            gc_param_list_add(list, "", name, states[k][i], false);
        }
    }
}

/* The saved moments of parameter `index` copied into new f32 tensors on its device, in
 * loaded[0][index] and loaded[1][index]; both left NULL when `list` has neither (the
 * parameter had no state yet). On an error the caller releases what was loaded. */
static gc_status load_moments(const char *prefix, const gc_param *param, const gc_param_list *list,
                              gc_tensor **const *loaded, int index) {
    const gc_tensor *p = param->tensor, *saved[2];
    char names[2][GC_PARAM_NAME_MAX];
    for (int k = 0; k < 2; k++) {
        state_name(names[k], "adamw_load_state", prefix, moment_kinds[k], param->name);
        saved[k] = gc_param_list_find(list, names[k]);
    }
    if (!saved[0] && !saved[1]) return GC_OK;
    for (int k = 0; k < 2; k++) {
        if (!saved[k] || !gc_same_shape(saved[k], p) || saved[k]->dtype != GC_F32) {
            char text[128], shape[96];
            gc_set_error(GC_ERR_FORMAT, "adamw_load_state: '%s' is %s, want %s f32 (the shape of parameter '%s')",
                         names[k], saved[k] ? gc_tensor_str(saved[k], text, sizeof text) : "missing",
                         gc_shape_str(p->ndim, p->shape, shape, sizeof shape), param->name);
            return GC_ERR_FORMAT;
        }
        gc_tensor *moment = loaded[k][index] = gc_empty(p->ndim, p->shape, GC_F32, p->device);
        if (!moment) return gc_last_status();
        gc_status status = gc_copy_(moment, saved[k]);
        if (status != GC_OK) return status;
    }
    return GC_OK;
}

gc_status gc_adamw_load_state(gc_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step) {
    if (step < 0) gc_fatal("adamw_load_state: step %lld is negative", (long long)step);
    if (step > GC_ADAMW_MAX_STEP) {
        gc_set_error(GC_ERR_FORMAT, "adamw_load_state: step %lld is beyond the largest count, 2^53", (long long)step);
        return GC_ERR_FORMAT;
    }
    int count = opt->params.count;
    gc_tensor **loaded[2] = {gc_optim_state_array(count), gc_optim_state_array(count)};
    gc_status status = GC_OK;
    for (int i = 0; i < count && status == GC_OK; i++)
        status = load_moments(prefix, &opt->params.items[i], list, loaded, i);
    gc_tensor **replaced[2] = {opt->exp_avg, opt->exp_avg_sq};
    if (status == GC_OK) { /* all or nothing: the old state goes only once the new one is complete */
        opt->exp_avg = loaded[0];
        opt->exp_avg_sq = loaded[1];
        opt->step = step;
    }
    for (int k = 0; k < 2; k++) gc_optim_free_states(status == GC_OK ? replaced[k] : loaded[k], count);
    return status;
}

void gc_adamw_free(gc_adamw *opt) {
    gc_optim_free_states(opt->exp_avg, opt->params.count);
    gc_optim_free_states(opt->exp_avg_sq, opt->params.count);
    gc_param_list_free(&opt->params);
    *opt = (gc_adamw){0};
}
