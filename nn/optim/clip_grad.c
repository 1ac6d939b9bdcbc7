/* Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_, in place or folded into an
 * optimizer's grad_scale. */
#include <math.h>

#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "gradcache/optim.h"

/* PyTorch's guard against dividing by a zero norm. */
#define CLIP_EPS 1e-6

/* sum(g^2) over one gradient, or nan when an allocation failed. f16 and bf16 gradients are
 * widened to f32 first: their own squares would overflow past |g| = 256 (f16) and lose
 * every bit below 2^-12. The sum is rounded to f32 (f64 for an f64 gradient), which is
 * plenty for a clipping threshold and keeps the temporary no larger than an f32 copy of the
 * gradient; the totals of the parameters are then added in double. */
static double squared_sum(const gc_tensor *grad) {
    bool wide = grad->dtype == GC_F32 || grad->dtype == GC_F64;
    gc_tensor *values = wide ? gc_tensor_retain((gc_tensor *)grad) : gc_cast(grad, GC_F32);
    gc_tensor *squares = gc_mul(values, values);
    gc_tensor *sum = gc_sum_all(squares);
    double result = sum ? gc_item(sum) : NAN;
    gc_tensor_release(values);
    gc_tensor_release(squares);
    gc_tensor_release(sum);
    return result;
}

double gc_grad_squared_sum(const gc_param_list *params) {
    bool previous = gc_set_grad_enabled(false);
    double sum = 0;
    for (int i = 0; i < params->count && !isnan(sum); i++) {
        const gc_tensor *grad = gc_grad(params->items[i].tensor);
        if (grad) sum += squared_sum(grad);
    }
    gc_set_grad_enabled(previous);
    return sum;
}

static void check_max_norm(const char *op, double max_norm) {
    if (!(max_norm >= 0)) gc_fatal("%s: max_norm %g is not >= 0", op, max_norm);
}

void gc_clip_scale_for_norm(double total, double max_norm, double *grad_scale) {
    check_max_norm("clip_scale_for_norm", max_norm);
    if (total > max_norm) *grad_scale *= max_norm / (total + CLIP_EPS); /* false for nan */
}

double gc_clip_grad_norm(const gc_param_list *params, double max_norm) {
    check_max_norm("clip_grad_norm", max_norm);
    double total = sqrt(gc_grad_squared_sum(params));
    if (total > max_norm) /* false for nan: nothing is scaled after a failed allocation */
        for (int i = 0; i < params->count; i++)
            gc_scale_inplace(gc_grad(params->items[i].tensor), max_norm / (total + CLIP_EPS));
    return total;
}

double gc_clip_grad_scale(const gc_param_list *params, double max_norm, double *grad_scale) {
    check_max_norm("clip_grad_scale", max_norm);
    double total = sqrt(gc_grad_squared_sum(params)) * *grad_scale;
    gc_clip_scale_for_norm(total, max_norm, grad_scale);
    return total;
}
