/* The fused optimizer updates as ops (op_internal.h): the checks, then the backend's
 * sgd_update or adamw_update, which change the parameter, its master copy and its state in
 * place in one pass. The optimizers (nn/optim/sgd.c, nn/optim/adamw.c) keep the state and the step
 * count; these only move the numbers. */
#include "backend.h"
#include "op_internal.h"
#include "op_util.h"

/* state (f32, or NULL when optional) of param's shape on param's device. */
static void check_state(const char *op, const char *what, const gc_tensor *param, const gc_tensor *state,
                        bool optional) {
    if (!state && optional) return;
    char tp[128], ts[128];
    if (!state || state->dtype != GC_F32 || !gc_same_shape(state, param) || !gc_device_equal(state->device, param->device))
        gc_fatal("%s: the %s must be f32 of the parameter's shape and device, got %s for parameter %s", op, what,
                 state ? gc_tensor_str(state, ts, sizeof ts) : "none", gc_tensor_str(param, tp, sizeof tp));
}

/* grad of param's shape, dtype and device; master only for a 16-bit parameter. */
static void check_update(const char *op, const gc_tensor *param, const gc_tensor *master, const gc_tensor *grad) {
    char tp[128], tg[128];
    gc_check_float(op, param);
    if (!gc_same_shape(grad, param) || grad->dtype != param->dtype || !gc_device_equal(grad->device, param->device))
        gc_fatal("%s: gradient %s does not match parameter %s", op, gc_tensor_str(grad, tg, sizeof tg),
                 gc_tensor_str(param, tp, sizeof tp));
    if (master && param->dtype != GC_F16 && param->dtype != GC_BF16)
        gc_fatal("%s: only f16 and bf16 parameters have an f32 master copy, not %s", op,
                 gc_tensor_str(param, tp, sizeof tp));
    check_state(op, "master copy", param, master, true);
}

/* The update wrote each of them (NULL: absent) in place. */
static void mark_written(gc_tensor *const *written, int count) {
    for (int i = 0; i < count; i++)
        if (written[i]) gc_tensor_mark_written(written[i]);
}

void gc_sgd_update_(gc_tensor *param, gc_tensor *master, const gc_tensor *grad, gc_tensor *momentum_buffer,
                    const gc_sgd_hyper *hyper) {
    check_update("sgd_update", param, master, grad);
    check_state("sgd_update", "momentum buffer", param, momentum_buffer, hyper->momentum == 0);
    gc_backend_for(param->device)->sgd_update(gc_data(param), master ? gc_data(master) : NULL, gc_data(grad),
                                              momentum_buffer ? gc_data(momentum_buffer) : NULL,
                                              (size_t)gc_numel(param), param->dtype, hyper);
    mark_written((gc_tensor *[]){param, master, momentum_buffer}, 3);
}

void gc_adamw_update_(gc_tensor *param, gc_tensor *master, const gc_tensor *grad, gc_tensor *exp_avg,
                      gc_tensor *exp_avg_sq, const gc_adamw_hyper *hyper) {
    check_update("adamw_update", param, master, grad);
    check_state("adamw_update", "first moment", param, exp_avg, false);
    check_state("adamw_update", "second moment", param, exp_avg_sq, false);
    gc_backend_for(param->device)->adamw_update(gc_data(param), master ? gc_data(master) : NULL, gc_data(grad),
                                                gc_data(exp_avg), gc_data(exp_avg_sq), (size_t)gc_numel(param),
                                                param->dtype, hyper);
    mark_written((gc_tensor *[]){param, master, exp_avg, exp_avg_sq}, 4);
}
