/* AdamW (Loshchilov and Hutter, "Decoupled Weight Decay Regularization"), as PyTorch's
 * torch.optim.AdamW: one fused update per parameter (gc_adamw_update_, tensor/op_internal.h),
 * which updates an f16 or bf16 parameter's f32 master and writes the parameter back in the
 * same pass; and the moments and masters as named tensors for checkpoints. */
#include <math.h>
#include <stdio.h>

#include "gradcache/memory.h"
#include "gradcache/optim.h"
#include "optimizer.h"
#include "tensor/op_internal.h"

gc_status gc_adamw_init(gc_adamw *opt, const gc_param_list *params, double lr, double beta1, double beta2, double eps,
                        double weight_decay) {
    /* Written so that nan fails every test. */
    if (!(lr >= 0 && beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps >= 0 && weight_decay >= 0))
        gc_fatal("adamw_init: lr %g, eps %g and weight_decay %g must be >= 0 and beta1 %g, beta2 %g in [0, 1)", lr,
                 eps, weight_decay, beta1, beta2);
    *opt = (gc_adamw){.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay,
                      .master_weights = true};
    gc_optim_copy_params(&opt->params, params);
    opt->exp_avg = gc_optim_state_array(opt->params.count);
    opt->exp_avg_sq = gc_optim_state_array(opt->params.count);
    opt->master = gc_optim_state_array(opt->params.count);
    return GC_OK;
}

/* ctx: the step's gc_adamw_hyper; state[0] and state[1] the first and second moments. */
static void adamw_update(const void *ctx, const gc_param *param, const gc_tensor *grad, gc_tensor *const *state,
                         gc_tensor *master, bool fresh) {
    (void)fresh; /* zero moments are AdamW's start: nothing differs at a first step */
    gc_adamw_hyper hyper = *(const gc_adamw_hyper *)ctx;
    if (param->no_decay) hyper.weight_decay = 0;
    gc_adamw_update_(param->tensor, master, grad, state[0], state[1], &hyper);
}

gc_status gc_adamw_step_scaled(gc_adamw *opt, double grad_scale) {
    gc_optim_check_grad_scale("adamw_step", grad_scale);
    if (opt->step >= GC_ADAMW_MAX_STEP)
        gc_fatal("adamw_step: step %lld would pass the largest count, 2^53", (long long)opt->step);
    int64_t step = opt->step + 1;
    float beta1 = (float)opt->beta1, beta2 = (float)opt->beta2;
    /* The bias corrections come from the f32 betas the kernel mixes with, so that at the
     * first step m / bc1 is g itself (1 - b1 is exact in f32), as the algorithm intends. */
    gc_adamw_hyper hyper = {.lr = (float)opt->lr, .beta1 = beta1, .beta2 = beta2, .eps = (float)opt->eps,
                            .weight_decay = (float)opt->weight_decay, .grad_scale = (float)grad_scale,
                            .bias_correction1 = (float)(1 - pow(beta1, (double)step)),
                            .bias_correction2 = (float)(1 - pow(beta2, (double)step))};
    gc_tensor **states[] = {opt->exp_avg, opt->exp_avg_sq};
    gc_optim_tensors tensors = {states, 2, opt->master, opt->master_weights};
    gc_status status = gc_optim_step("adamw", &opt->params, &tensors, adamw_update, &hyper);
    if (status == GC_OK) opt->step = step;
    return status;
}

gc_status gc_adamw_step(gc_adamw *opt) { return gc_adamw_step_scaled(opt, 1); }

/* --- state for checkpoints --- */

/* A parameter's state tensors, in the order of the arrays below. */
enum { EXP_AVG, EXP_AVG_SQ, MASTER, KINDS = GC_ADAMW_STATE_KINDS };

void gc_adamw_state_names(const char *prefix, const char *param, char names[GC_ADAMW_STATE_KINDS][GC_PARAM_NAME_MAX]) {
    static const char *const kinds[KINDS] = {"exp_avg", "exp_avg_sq", "master"};
    bool dotted = prefix && *prefix;
    for (int k = 0; k < KINDS; k++) {
        int length = snprintf(names[k], GC_PARAM_NAME_MAX, "%s%s%s.%s", dotted ? prefix : "", dotted ? "." : "",
                              kinds[k], param);
        if (length >= GC_PARAM_NAME_MAX)
            gc_fatal("adamw_state_names: the state name of parameter '%s' under prefix '%s' is longer than %d "
                     "characters", param, dotted ? prefix : "", GC_PARAM_NAME_MAX - 1);
    }
}

void gc_adamw_state(const gc_adamw *opt, const char *prefix, gc_param_list *list) {
    gc_tensor **states[KINDS] = {opt->exp_avg, opt->exp_avg_sq, opt->master};
    char names[KINDS][GC_PARAM_NAME_MAX];
    for (int i = 0; i < opt->params.count; i++) {
        gc_adamw_state_names(prefix, opt->params.items[i].name, names);
        for (int k = 0; k < KINDS; k++)
            if (states[k][i]) gc_param_list_add(list, "", names[k], states[k][i], false); /* none: no step reached it yet, or no master */
    }
}

/* GC_ERR_FORMAT: entry `name` of parameter `param` is not what it should be. */
static gc_status bad_entry(const char *name, const char *problem, const gc_param *param) {
    char text[128];
    gc_set_error(GC_ERR_FORMAT, "adamw_load_state: '%s' %s (parameter '%s' is %s)", name, problem, param->name,
                 gc_tensor_str(param->tensor, text, sizeof text));
    return GC_ERR_FORMAT;
}

/* What the saved state of `param` must be: both moments or neither; a master exactly when the
 * parameter is f16 or bf16, has moments and the optimizer keeps masters (one saved for a
 * parameter of another dtype means the state comes from a run in another precision); every
 * entry f32 of the parameter's shape. */
static gc_status check_saved(const gc_adamw *opt, const gc_param *param, const gc_tensor *const saved[KINDS],
                             char names[KINDS][GC_PARAM_NAME_MAX]) {
    const gc_tensor *p = param->tensor;
    if (!saved[EXP_AVG] != !saved[EXP_AVG_SQ]) return bad_entry(names[saved[EXP_AVG] ? 1 : 0], "is missing", param);
    bool half = gc_optim_has_master(p->dtype);
    if (saved[MASTER] && (!half || !saved[EXP_AVG]))
        return bad_entry(names[MASTER], half ? "is a master without moments" : "is a master copy, which only f16 and"
                                                                              " bf16 parameters have",
                         param);
    if (!saved[MASTER] && saved[EXP_AVG] && half && opt->master_weights)
        return bad_entry(names[MASTER], "is missing: the state was saved without master weights", param);
    for (int k = 0; k < KINDS; k++)
        if (saved[k] && (!gc_same_shape(saved[k], p) || saved[k]->dtype != GC_F32)) {
            char problem[160], text[96], shape[64];
            snprintf(problem, sizeof problem, "is %s, want %s f32", gc_tensor_str(saved[k], text, sizeof text),
                     gc_shape_str(p->ndim, p->shape, shape, sizeof shape));
            return bad_entry(names[k], problem, param);
        }
    return GC_OK;
}

/* The saved state of parameter `index` copied into new f32 tensors on its device, in
 * loaded[k][index]; left NULL where `list` has none (no step had reached it, or it has no
 * master). On an error the caller releases what was loaded. */
static gc_status load_param_state(const gc_adamw *opt, const char *prefix, const gc_param *param,
                                  const gc_param_list *list, gc_tensor **const *loaded, int index) {
    const gc_tensor *saved[KINDS];
    char names[KINDS][GC_PARAM_NAME_MAX];
    gc_adamw_state_names(prefix, param->name, names);
    for (int k = 0; k < KINDS; k++) saved[k] = gc_param_list_find(list, names[k]);
    gc_status status = check_saved(opt, param, saved, names);
    for (int k = 0; k < KINDS && status == GC_OK; k++) {
        if (!saved[k]) continue;
        const gc_tensor *p = param->tensor;
        gc_tensor *copy = loaded[k][index] = gc_empty(p->ndim, p->shape, GC_F32, p->device);
        status = copy ? gc_copy_(copy, saved[k]) : gc_last_status();
    }
    return status;
}

gc_status gc_adamw_load_state(gc_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step) {
    if (step < 0) gc_fatal("adamw_load_state: step %lld is negative", (long long)step);
    if (step > GC_ADAMW_MAX_STEP) {
        gc_set_error(GC_ERR_FORMAT, "adamw_load_state: step %lld is beyond the largest count, 2^53", (long long)step);
        return GC_ERR_FORMAT;
    }
    int count = opt->params.count;
    gc_tensor **loaded[KINDS];
    for (int k = 0; k < KINDS; k++) loaded[k] = gc_optim_state_array(count);
    gc_status status = GC_OK;
    gc_memory_role role = gc_memory_set_role(GC_MEMORY_OPTIMIZER);
    for (int i = 0; i < count && status == GC_OK; i++)
        status = load_param_state(opt, prefix, &opt->params.items[i], list, loaded, i);
    gc_memory_set_role(role);
    gc_tensor **replaced[KINDS] = {opt->exp_avg, opt->exp_avg_sq, opt->master};
    if (status == GC_OK) { /* all or nothing: the old state goes only once the new one is complete */
        opt->exp_avg = loaded[EXP_AVG];
        opt->exp_avg_sq = loaded[EXP_AVG_SQ];
        opt->master = loaded[MASTER];
        opt->step = step;
    }
    for (int k = 0; k < KINDS; k++) gc_optim_free_states(status == GC_OK ? replaced[k] : loaded[k], count);
    return status;
}

void gc_adamw_free(gc_adamw *opt) {
    gc_optim_free_states(opt->exp_avg, opt->params.count);
    gc_optim_free_states(opt->exp_avg_sq, opt->params.count);
    gc_optim_free_states(opt->master, opt->params.count);
    gc_param_list_free(&opt->params);
    *opt = (gc_adamw){0};
}
