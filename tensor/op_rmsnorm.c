/* RMSNorm over the last dim (Llama's, Mistral's, Qwen's): the checks, the allocations and the
 * dispatch; the arithmetic is tensor/rmsnorm_impl.h's. Like layernorm, eps must be > 0 and
 * the last dim not empty, and a NULL weight means 1. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "record.h"

static void check_inputs(const char *op, const gc_tensor *x, const gc_tensor *weight, double eps) {
    char x_text[128], w_text[128];
    gc_check_float(op, x);
    gc_check_min_ndim(op, x, 1);
    if (gc_last_dim(x) == 0)
        gc_fatal("%s: %s has an empty last dim, nothing to normalise", op, gc_tensor_str(x, x_text, sizeof x_text));
    if (weight && (weight->ndim != 1 || weight->shape[0] != gc_last_dim(x)))
        gc_fatal("%s: weight %s is not [%lld] for x %s", op, gc_tensor_str(weight, w_text, sizeof w_text),
                 (long long)gc_last_dim(x), gc_tensor_str(x, x_text, sizeof x_text));
    if (weight) {
        gc_check_same_dtype(op, x, weight);
        gc_check_same_device(op, x, weight);
    }
    if (!(eps > 0)) gc_fatal("%s: eps must be > 0, got %g", op, eps);
}

gc_tensor *gc_rmsnorm(const gc_tensor *x, const gc_tensor *weight, double eps) {
    if (!x) return NULL;
    check_inputs("rmsnorm", x, weight, eps);
    gc_tensor *y = gc_empty_like(x);
    if (y)
        gc_backend_for(x->device)->rmsnorm(gc_data(x), weight ? gc_data(weight) : NULL, gc_data(y),
                                           (size_t)gc_leading_rows(x), (size_t)gc_last_dim(x), eps, x->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_RMSNORM, .n_inputs = 2,
                                        .inputs = (const gc_tensor *[]){x, weight}, .output = y,
                                        .params.rmsnorm = {eps}});
}

bool gc_rmsnorm_backward(const gc_tensor *x, const gc_tensor *weight, const gc_tensor *g, double eps, gc_tensor **dx,
                         gc_tensor **g_xhat) {
    check_inputs("rmsnorm_backward", x, weight, eps);
    gc_check_same_dtype("rmsnorm_backward", x, g);
    if (!gc_same_shape(x, g)) gc_fatal("rmsnorm_backward: g is not of x's shape");
    gc_tensor *input_grad = dx ? gc_empty_like(x) : NULL;
    gc_tensor *products = g_xhat ? gc_empty(x->ndim, x->shape, gc_working_dtype(x->dtype), x->device) : NULL;
    if ((dx && !input_grad) || (g_xhat && !products)) {
        gc_tensor_release(input_grad);
        gc_tensor_release(products);
        return false;
    }
    gc_backend_for(x->device)->rmsnorm_backward(gc_data(x), weight ? gc_data(weight) : NULL, gc_data(g),
                                                input_grad ? gc_data(input_grad) : NULL,
                                                products ? gc_data(products) : NULL, (size_t)gc_leading_rows(x),
                                                (size_t)gc_last_dim(x), eps, x->dtype);
    if (dx) *dx = input_grad;
    if (g_xhat) *g_xhat = products;
    return true;
}
