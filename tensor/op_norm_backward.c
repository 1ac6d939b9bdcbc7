/* The input gradient of layernorm and the terms of gamma's (op_internal.h): the backend's
 * fused kernel where it has one (the CPU), else the same arithmetic composed of ops (as on
 * CUDA). The choice is made here, never above the tensor layer; GC_COMPOSED_OPS=1 makes the
 * CPU take the composed path too, so that the CPU suite runs it (tensor/device.c). With
 * xhat = (x - mean) rstd and dxhat = g gamma:
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  g_xhat = g xhat. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"

/* The backend's fused kernel: one pass per row for each output. */
static bool fused_grads(const gc_backend *backend, const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *g,
                        double eps, gc_tensor **dx, gc_tensor **g_xhat) {
    gc_tensor *input_grad = dx ? gc_empty_like(x) : NULL, *products = g_xhat ? gc_empty_like(x) : NULL;
    if ((dx && !input_grad) || (g_xhat && !products)) {
        gc_tensor_release(input_grad);
        gc_tensor_release(products);
        return false;
    }
    backend->layernorm_backward(gc_data(x), gamma ? gc_data(gamma) : NULL, gc_data(g),
                                input_grad ? gc_data(input_grad) : NULL, products ? gc_data(products) : NULL,
                                (size_t)gc_leading_rows(x), (size_t)gc_last_dim(x), eps, x->dtype);
    if (dx) *dx = input_grad;
    if (g_xhat) *g_xhat = products;
    return true;
}

/* xhat [..., cols] of x, and rstd [..., 1] into *rstd_out. */
static gc_tensor *normalised_input(const gc_tensor *x, double eps, gc_tensor **rstd_out) {
    gc_tensor *mean = gc_mean_last(x, true);
    gc_tensor *centred = gc_sub(x, mean);
    gc_tensor *square = gc_mul(centred, centred);
    gc_tensor *variance = gc_mean_last(square, true);
    gc_tensor *shifted = gc_add_scalar(variance, eps);
    gc_tensor *rstd = gc_rsqrt(shifted);
    gc_tensor *xhat = gc_mul(centred, rstd);
    gc_tensor *temporaries[] = {mean, centred, square, variance, shifted};
    for (int i = 0; i < 5; i++) gc_tensor_release(temporaries[i]);
    *rstd_out = rstd;
    return xhat;
}

/* The same composed of ops, for a backend without the fused kernel; false when an op ran out
 * of memory (whatever was made is released). */
static bool composed_grads(const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *g, double eps,
                           gc_tensor **dx, gc_tensor **g_xhat) {
    gc_tensor *rstd = NULL, *xhat = normalised_input(x, eps, &rstd);
    if (dx) {
        gc_tensor *dxhat = gamma ? gc_mul(g, gamma) : gc_tensor_retain((gc_tensor *)g);
        gc_tensor *mean_dxhat = gc_mean_last(dxhat, true);
        gc_tensor *dxhat_xhat = gc_mul(dxhat, xhat);
        gc_tensor *mean_dxhat_xhat = gc_mean_last(dxhat_xhat, true);
        gc_tensor *projection = gc_mul(xhat, mean_dxhat_xhat);
        gc_tensor *centred = gc_sub(dxhat, mean_dxhat);
        gc_tensor *inner = gc_sub(centred, projection);
        *dx = gc_mul(inner, rstd);
        gc_tensor *temporaries[] = {dxhat, mean_dxhat, dxhat_xhat, mean_dxhat_xhat, projection, centred, inner};
        for (int i = 0; i < 7; i++) gc_tensor_release(temporaries[i]);
    }
    if (g_xhat) *g_xhat = gc_mul(g, xhat);
    gc_tensor_release(xhat);
    gc_tensor_release(rstd);
    bool made = (!dx || *dx) && (!g_xhat || *g_xhat);
    if (!made && dx) {
        gc_tensor_release(*dx);
        *dx = NULL;
    }
    if (!made && g_xhat) {
        gc_tensor_release(*g_xhat);
        *g_xhat = NULL;
    }
    return made;
}

bool gc_layernorm_backward(const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *g, double eps,
                           gc_tensor **dx, gc_tensor **g_xhat) {
    const gc_backend *backend = gc_backend_for(x->device);
    if (backend->layernorm_backward && (x->dtype == GC_F32 || x->dtype == GC_F64))
        return fused_grads(backend, x, gamma, g, eps, dx, g_xhat);
    return composed_grads(x, gamma, g, eps, dx, g_xhat);
}
