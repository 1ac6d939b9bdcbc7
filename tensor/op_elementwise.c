/* Elementwise ops: binary ops with NumPy broadcasting, ops with a scalar, unary maps.
 * Each checks its inputs, allocates the output and calls one backend kernel. */
#include <math.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "record.h"

/* --- binary --- */

/* x's shape right-aligned on GC_BCAST_DIMS dims, missing leading dims of size 1. */
static void padded_shape(const gc_tensor *x, int64_t *shape) {
    int pad = GC_BCAST_DIMS - x->ndim;
    for (int d = 0; d < GC_BCAST_DIMS; d++) shape[d] = d < pad ? 1 : x->shape[d - pad];
}

/* Fills bc for a op b and returns the number of dims of the result (the larger ndim).
 * A size-1 dim of an input gets stride 0, so the kernel repeats its one element along
 * the output's dim. */
static int broadcast(const char *op, const gc_tensor *a, const gc_tensor *b, gc_broadcast *bc) {
    int64_t a_shape[GC_BCAST_DIMS], b_shape[GC_BCAST_DIMS];
    padded_shape(a, a_shape);
    padded_shape(b, b_shape);
    int64_t a_next = 1, b_next = 1; /* the contiguous stride of the dim being visited */
    bc->numel = 1;
    for (int d = GC_BCAST_DIMS - 1; d >= 0; d--) {
        if (a_shape[d] != b_shape[d] && a_shape[d] != 1 && b_shape[d] != 1) {
            char ta[128], tb[128];
            gc_fatal("%s: shapes do not broadcast: %s and %s", op, gc_tensor_str(a, ta, sizeof ta),
                     gc_tensor_str(b, tb, sizeof tb));
        }
        bc->out_shape[d] = a_shape[d] == 1 ? b_shape[d] : a_shape[d];
        bc->a_stride[d] = a_shape[d] == 1 ? 0 : a_next;
        bc->b_stride[d] = b_shape[d] == 1 ? 0 : b_next;
        a_next *= a_shape[d];
        b_next *= b_shape[d];
        bc->numel *= bc->out_shape[d];
    }
    return a->ndim > b->ndim ? a->ndim : b->ndim;
}

static gc_tensor *binary(const char *name, gc_binary_op op, const gc_tensor *a, const gc_tensor *b) {
    if (!a || !b) return NULL;
    gc_check_same_device(name, a, b);
    gc_check_same_dtype(name, a, b);
    if (op == GC_BINARY_DIV) gc_check_float(name, a);
    gc_broadcast bc;
    int ndim = broadcast(name, a, b, &bc);
    gc_tensor *out = gc_empty(ndim, bc.out_shape + GC_BCAST_DIMS - ndim, a->dtype, a->device);
    if (out) gc_backend_for(out->device)->binary(op, gc_data(a), gc_data(b), gc_data(out), &bc, a->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_BINARY, .n_inputs = 2, .inputs = (const gc_tensor *[]){a, b},
                                        .output = out, .params.binary = {op}});
}

gc_tensor *gc_add(const gc_tensor *a, const gc_tensor *b) { return binary("add", GC_BINARY_ADD, a, b); }
gc_tensor *gc_sub(const gc_tensor *a, const gc_tensor *b) { return binary("sub", GC_BINARY_SUB, a, b); }
gc_tensor *gc_mul(const gc_tensor *a, const gc_tensor *b) { return binary("mul", GC_BINARY_MUL, a, b); }
gc_tensor *gc_div(const gc_tensor *a, const gc_tensor *b) { return binary("div", GC_BINARY_DIV, a, b); }

/* Broadcasting x to a shape is a binary op whose other operand is a zero scalar. */
bool gc_broadcast_into(const char *op, const gc_tensor *x, gc_tensor *target) {
    gc_tensor *zero = gc_zeros(0, NULL, x->dtype, x->device);
    if (!zero) return false;
    gc_broadcast bc;
    int out_ndim = broadcast(op, x, target, &bc);
    if (out_ndim != target->ndim || bc.numel != gc_numel(target)) {
        char tx[128], shape_text[96];
        gc_fatal("%s: %s cannot be broadcast to %s", op, gc_tensor_str(x, tx, sizeof tx),
                 gc_shape_str(target->ndim, target->shape, shape_text, sizeof shape_text));
    }
    for (int d = 0; d < GC_BCAST_DIMS; d++) bc.b_stride[d] = 0; /* x + 0 */
    gc_backend_for(x->device)->binary(GC_BINARY_ADD, gc_data(x), gc_data(zero), gc_data(target), &bc, x->dtype);
    gc_tensor_release(zero);
    return true;
}

gc_tensor *gc_expand(const gc_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    gc_tensor *target = gc_empty(ndim, shape, x->dtype, x->device); /* the result, and the shape to check */
    if (!target || !gc_broadcast_into("expand", x, target)) {
        gc_tensor_release(target);
        return NULL;
    }
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_EXPAND, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                        .output = target});
}

gc_status gc_add_inplace(gc_tensor *dst, const gc_tensor *src) {
    char td[128], ts[128];
    gc_check_same_device("add_inplace", dst, src);
    if (!gc_same_shape(dst, src) || dst->dtype != src->dtype)
        gc_fatal("add_inplace: destination %s and source %s differ in shape or dtype", gc_tensor_str(dst, td, sizeof td),
                 gc_tensor_str(src, ts, sizeof ts));
    gc_broadcast bc;
    broadcast("add_inplace", dst, src, &bc);
    gc_backend_for(dst->device)->binary(GC_BINARY_ADD, gc_data(dst), gc_data(src), gc_data(dst), &bc, dst->dtype);
    gc_tensor_mark_written(dst);
    return GC_OK;
}

void gc_scale_inplace(gc_tensor *x, double s) {
    if (!x) return;
    gc_check_float("scale_inplace", x);
    gc_backend_for(x->device)->binary_scalar(GC_BINARY_MUL, gc_data(x), s, false, gc_data(x), (size_t)gc_numel(x),
                                             x->dtype);
    gc_tensor_mark_written(x);
}

/* --- with a scalar --- */

static gc_tensor *with_scalar(const char *name, gc_binary_op op, const gc_tensor *a, double s,
                              bool scalar_first) {
    if (!a) return NULL;
    char text[128];
    if (op == GC_BINARY_DIV) gc_check_float(name, a);
    /* An i32 op stays in integers, so the scalar has to be one (nan and inf are not). */
    if (a->dtype == GC_I32 && !(s == trunc(s) && s >= INT32_MIN && s <= INT32_MAX))
        gc_fatal("%s: scalar %.17g is not an i32 value, for %s", name, s, gc_tensor_str(a, text, sizeof text));
    gc_tensor *out = gc_empty_like(a);
    if (out)
        gc_backend_for(out->device)->binary_scalar(op, gc_data(a), s, scalar_first, gc_data(out),
                                                   (size_t)gc_numel(out), a->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_BINARY_SCALAR, .n_inputs = 1, .inputs = (const gc_tensor *[]){a},
                                        .output = out, .params.scalar = {op, s, scalar_first}});
}

gc_tensor *gc_add_scalar(const gc_tensor *a, double s) { return with_scalar("add_scalar", GC_BINARY_ADD, a, s, false); }
gc_tensor *gc_mul_scalar(const gc_tensor *a, double s) { return with_scalar("mul_scalar", GC_BINARY_MUL, a, s, false); }
gc_tensor *gc_sub_scalar(const gc_tensor *a, double s) { return with_scalar("sub_scalar", GC_BINARY_SUB, a, s, false); }
gc_tensor *gc_rsub_scalar(const gc_tensor *a, double s) { return with_scalar("rsub_scalar", GC_BINARY_SUB, a, s, true); }
gc_tensor *gc_div_scalar(const gc_tensor *a, double s) { return with_scalar("div_scalar", GC_BINARY_DIV, a, s, false); }
gc_tensor *gc_rdiv_scalar(const gc_tensor *a, double s) { return with_scalar("rdiv_scalar", GC_BINARY_DIV, a, s, true); }

/* --- unary --- */

static gc_tensor *unary_unrecorded(const char *name, gc_unary_op op, const gc_tensor *x) {
    if (!x) return NULL;
    gc_check_float(name, x);
    gc_tensor *y = gc_empty_like(x);
    if (y) gc_backend_for(y->device)->unary(op, gc_data(x), gc_data(y), (size_t)gc_numel(y), x->dtype);
    return y;
}

static gc_tensor *unary(const char *name, gc_unary_op op, const gc_tensor *x) {
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_UNARY, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                        .output = unary_unrecorded(name, op, x), .params.unary = {op}});
}

gc_tensor *gc_unary_apply(gc_unary_op op, const gc_tensor *x) { return unary_unrecorded("unary", op, x); }

gc_tensor *gc_unary_grad(gc_unary_op derivative, const gc_tensor *x, const gc_tensor *g) {
    if (!x || !g) return NULL;
    if (derivative != GC_UNARY_RELU_GRAD && derivative != GC_UNARY_GELU_TANH_GRAD &&
        derivative != GC_UNARY_GELU_ERF_GRAD)
        gc_fatal("unary_grad: op %d is not a derivative taken from x", (int)derivative);
    gc_check_same_device("unary_grad", x, g);
    gc_check_same_dtype("unary_grad", x, g);
    if (!gc_same_shape(x, g)) {
        char tx[128], tg[128];
        gc_fatal("unary_grad: x %s and g %s differ in shape", gc_tensor_str(x, tx, sizeof tx),
                 gc_tensor_str(g, tg, sizeof tg));
    }
    /* fused in f32 and f64 only: in f16 and bf16 the composition rounds the derivative to the
     * dtype before the multiply, and the backward rules are held to its bits */
    if (x->dtype != GC_F32 && x->dtype != GC_F64) {
        gc_tensor *slope = gc_unary_apply(derivative, x), *dx = gc_mul(g, slope);
        gc_tensor_release(slope);
        return dx;
    }
    gc_tensor *dx = gc_empty_like(x);
    if (dx)
        gc_backend_for(x->device)->unary_grad(derivative, gc_data(x), gc_data(g), gc_data(dx), (size_t)gc_numel(x),
                                              x->dtype);
    return dx;
}

gc_tensor *gc_neg(const gc_tensor *x) { return unary("neg", GC_UNARY_NEG, x); }
gc_tensor *gc_exp(const gc_tensor *x) { return unary("exp", GC_UNARY_EXP, x); }
gc_tensor *gc_log(const gc_tensor *x) { return unary("log", GC_UNARY_LOG, x); }
gc_tensor *gc_tanh(const gc_tensor *x) { return unary("tanh", GC_UNARY_TANH, x); }
gc_tensor *gc_relu(const gc_tensor *x) { return unary("relu", GC_UNARY_RELU, x); }
gc_tensor *gc_gelu_tanh(const gc_tensor *x) { return unary("gelu_tanh", GC_UNARY_GELU_TANH, x); }
gc_tensor *gc_gelu_erf(const gc_tensor *x) { return unary("gelu_erf", GC_UNARY_GELU_ERF, x); }
gc_tensor *gc_sqrt(const gc_tensor *x) { return unary("sqrt", GC_UNARY_SQRT, x); }
gc_tensor *gc_rsqrt(const gc_tensor *x) { return unary("rsqrt", GC_UNARY_RSQRT, x); }
