/* Reductions over the last dim and over every element, softmax and log-softmax: the
 * checks, the result's shape, and the dispatch to the backend (the arithmetic and its
 * nan, inf and i32 rules are described in tensor/cpu/reduce_cpu.c).
 *
 * Choices:
 *  - a 0-dim x is one row of one element: a *_last reduction of it is that element,
 *    0-dim whether keepdim or not (as in PyTorch), and its softmax is 1;
 *  - i32 is allowed for sum (which wraps modulo 2^32) and max; a mean of integers is
 *    fractional and the result keeps x's dtype, so mean needs a floating dtype (cast
 *    first), as do softmax and log-softmax;
 *  - over an empty last dim, sum is 0 and mean 0/0 = nan (as in PyTorch), while a max
 *    has no element to return: a programmer error;
 *  - a max always computes the index of its maximum (the i32 argmax, which the backward
 *    pass needs), so a max over more than INT32_MAX elements is refused. */
#include <math.h>
#include <stdint.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

/* x read as rows of `cols` elements, one per element of the result out_shape. */
static gc_tensor *reduce(const char *op, gc_reduce_op kind, const gc_tensor *x, int out_ndim,
                         const int64_t *out_shape, int64_t cols, gc_tensor **argmax, gc_op_kind recorded_as,
                         bool keepdim) {
    char text[128];
    bool is_max = kind == GC_REDUCE_MAX;
    if (kind == GC_REDUCE_MEAN) gc_check_float(op, x);
    if (is_max && cols == 0)
        gc_fatal("%s: %s has no element to take the max of", op, gc_tensor_str(x, text, sizeof text));
    if (is_max && cols > INT32_MAX)
        gc_fatal("%s: the indices of a last dim of %lld elements do not fit the i32 argmax (%s)", op,
                 (long long)cols, gc_tensor_str(x, text, sizeof text));
    gc_tensor *out = gc_empty(out_ndim, out_shape, x->dtype, x->device);
    gc_tensor *index = out && is_max ? gc_empty(out_ndim, out_shape, GC_I32, x->device) : NULL;
    if (!out || (is_max && !index)) {
        gc_tensor_release(out);
        return NULL;
    }
    gc_backend_for(x->device)->reduce_last(kind, gc_data(x), gc_data(out), index ? gc_data(index) : NULL,
                                           (size_t)gc_numel(out), (size_t)cols, x->dtype);
    out = gc_finish_op(&(gc_op_record){.kind = recorded_as, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                       .output = out, .params.reduce = {kind, keepdim, index}});
    if (argmax && out) *argmax = index;
    else gc_tensor_release(index);
    return out;
}

/* x [..., cols] -> [...] or, with keepdim, [..., 1]. */
static gc_tensor *reduce_last(const char *op, gc_reduce_op kind, const gc_tensor *x, bool keepdim,
                              gc_tensor **argmax) {
    if (argmax) *argmax = NULL;
    if (!x) return NULL;
    int64_t shape[GC_MAX_DIMS];
    int ndim = x->ndim ? x->ndim - 1 : 0;
    for (int i = 0; i < ndim; i++) shape[i] = x->shape[i];
    if (keepdim && x->ndim) shape[ndim++] = 1;
    return reduce(op, kind, x, ndim, shape, gc_last_dim(x), argmax, GC_OP_REDUCE_LAST, keepdim);
}

/* x of any shape -> 0-dim, as one row of all its elements. */
static gc_tensor *reduce_all(const char *op, gc_reduce_op kind, const gc_tensor *x) {
    return x ? reduce(op, kind, x, 0, NULL, gc_numel(x), NULL, GC_OP_REDUCE_ALL, false) : NULL;
}

gc_tensor *gc_sum_last(const gc_tensor *x, bool keepdim) {
    return reduce_last("sum_last", GC_REDUCE_SUM, x, keepdim, NULL);
}

gc_tensor *gc_mean_last(const gc_tensor *x, bool keepdim) {
    return reduce_last("mean_last", GC_REDUCE_MEAN, x, keepdim, NULL);
}

gc_tensor *gc_max_last(const gc_tensor *x, bool keepdim, gc_tensor **argmax) {
    return reduce_last("max_last", GC_REDUCE_MAX, x, keepdim, argmax);
}

gc_tensor *gc_sum_all(const gc_tensor *x) { return reduce_all("sum_all", GC_REDUCE_SUM, x); }
gc_tensor *gc_mean_all(const gc_tensor *x) { return reduce_all("mean_all", GC_REDUCE_MEAN, x); }
gc_tensor *gc_max_all(const gc_tensor *x) { return reduce_all("max_all", GC_REDUCE_MAX, x); }

/* x, y [..., cols], normalised along the last dim, of scale x + bias (bias checked and laid
 * out by the caller, or NULL). */
static gc_tensor *softmax(const char *op, const gc_tensor *x, bool log, double scale, const gc_tensor *bias,
                          const gc_softmax_bias *bias_rows) {
    gc_check_float(op, x);
    gc_tensor *y = gc_empty_like(x);
    if (y)
        gc_backend_for(x->device)->softmax_last(gc_data(x), gc_data(y), (size_t)gc_leading_rows(x),
                                                (size_t)gc_last_dim(x), x->dtype, log, scale, bias_rows);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_SOFTMAX, .n_inputs = bias ? 2 : 1,
                                        .inputs = (const gc_tensor *[]){x, bias}, .output = y,
                                        .params.softmax = {log, scale}});
}

gc_tensor *gc_softmax(const gc_tensor *x) { return x ? softmax("softmax", x, false, 1.0, NULL, NULL) : NULL; }
gc_tensor *gc_log_softmax(const gc_tensor *x) { return x ? softmax("log_softmax", x, true, 1.0, NULL, NULL) : NULL; }

gc_tensor *gc_softmax_scaled(const gc_tensor *x /* [B, H, Q, C] */, double scale,
                             const gc_tensor *bias /* [B or 1, 1, Q or 1, C] or NULL */) {
    if (!x) return NULL;
    char x_text[128], bias_text[128];
    if (x->ndim != 4 || !isfinite(scale))
        gc_fatal("softmax_scaled: x %s is not [B, H, Q, C], or the scale %g is not finite",
                 gc_tensor_str(x, x_text, sizeof x_text), scale);
    if (!bias) return softmax("softmax_scaled", x, false, scale, NULL, NULL);
    gc_check_same_device("softmax_scaled", x, bias);
    gc_check_same_dtype("softmax_scaled", x, bias);
    const int64_t *s = x->shape, *b = bias->shape;
    if (bias->ndim != 4 || (b[0] != 1 && b[0] != s[0]) || b[1] != 1 || (b[2] != 1 && b[2] != s[2]) || b[3] != s[3])
        gc_fatal("softmax_scaled: bias %s is not [1 or %lld, 1, 1 or %lld, %lld] for x %s",
                 gc_tensor_str(bias, bias_text, sizeof bias_text), (long long)s[0], (long long)s[2], (long long)s[3],
                 gc_tensor_str(x, x_text, sizeof x_text));
    /* (an empty x has no rows: its divisors are then 1 rather than 0) */
    size_t rows_per_batch = (size_t)(s[1] * s[2]);
    gc_softmax_bias rows = {.data = gc_data(bias),
                            .rows_per_batch = rows_per_batch ? rows_per_batch : 1,
                            .queries = s[2] ? (size_t)s[2] : 1,
                            .batch_stride = b[0] == 1 ? 0 : (size_t)(b[2] * b[3]),
                            .query_stride = b[2] == 1 ? 0 : (size_t)b[3]};
    return softmax("softmax_scaled", x, false, scale, bias, &rows);
}
