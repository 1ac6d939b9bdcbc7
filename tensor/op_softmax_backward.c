/* The input gradient of a softmax (op_internal.h), y its output and g the gradient reaching it:
 *   softmax of scale x + bias:      dx = scale y (g - sum(g y)),
 *   log-softmax of scale x + bias:  dx = scale (g - e^y sum(g)).
 * The backend's fused kernel where it has one (the CPU's, for a softmax: attention's, where
 * five passes over the [B, H, T, T] probabilities, four of them allocating, became one), else
 * the ops composed (CUDA, the log-softmax, GC_COMPOSED_OPS=1). The kernel rounds each
 * intermediate as its op would, so both give the same bits (tests/test_softmax_backward.c). */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"

/* The composed ops, scale aside. */
static gc_tensor *composed_grad(const gc_tensor *y, const gc_tensor *g, bool log) {
    if (log) {
        gc_tensor *softmax = gc_exp(y);
        gc_tensor *total = gc_sum_last(g, true);
        gc_tensor *share = gc_mul(softmax, total);
        gc_tensor *dx = gc_sub(g, share);
        gc_tensor_release(softmax);
        gc_tensor_release(total);
        gc_tensor_release(share);
        return dx;
    }
    gc_tensor *gy = gc_mul(g, y);
    gc_tensor *total = gc_sum_last(gy, true);
    gc_tensor *centred = gc_sub(g, total);
    gc_tensor *dx = gc_mul(y, centred);
    gc_tensor_release(gy);
    gc_tensor_release(total);
    gc_tensor_release(centred);
    return dx;
}

gc_tensor *gc_softmax_backward(const gc_tensor *y /* [..., cols] */, const gc_tensor *g /* y's shape */, bool log,
                               double scale) {
    if (!y || !g) return NULL;
    char y_text[128], g_text[128];
    if (!gc_same_shape(y, g) || (y->dtype != GC_F32 && y->dtype != GC_F64))
        gc_fatal("softmax_backward: y %s and g %s are not one shape of f32 or f64",
                 gc_tensor_str(y, y_text, sizeof y_text), gc_tensor_str(g, g_text, sizeof g_text));
    gc_check_same_dtype("softmax_backward", y, g);
    gc_check_same_device("softmax_backward", y, g);
    const gc_backend *backend = gc_backend_for(y->device);
    if (backend->softmax_backward && !log) {
        gc_tensor *dx = gc_empty_like(y);
        if (dx) backend->softmax_backward(gc_data(y), gc_data(g), gc_data(dx), (size_t)gc_leading_rows(y),
                                          (size_t)gc_last_dim(y), scale, y->dtype);
        return dx;
    }
    gc_tensor *dx = composed_grad(y, g, log);
    if (scale == 1.0 || !dx) return dx;
    gc_tensor *scaled = gc_mul_scalar(dx, scale);
    gc_tensor_release(dx);
    return scaled;
}
