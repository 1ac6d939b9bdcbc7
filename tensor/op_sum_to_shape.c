/* gc_sum_to_shape: the inverse of broadcasting, composed of recorded ops (permute,
 * reshape, sum over the last dim), so that it is itself differentiable. */
#include "gradcache/ops.h"
#include "op_util.h"

gc_tensor *gc_sum_to_shape(const gc_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    char tx[128], target_text[96];
    if (ndim > x->ndim) goto not_broadcast;
    /* The target right-aligned on x's dims; a dim is reduced where the target has 1. */
    int pad = x->ndim - ndim;
    int kept[GC_MAX_DIMS], reduced[GC_MAX_DIMS], n_kept = 0, n_reduced = 0;
    int64_t kept_shape[GC_MAX_DIMS], reduced_numel = 1;
    for (int d = 0; d < x->ndim; d++) {
        int64_t target = d < pad ? 1 : shape[d - pad];
        if (target == x->shape[d]) {
            kept_shape[n_kept] = target;
            kept[n_kept++] = d;
        } else if (target == 1) {
            reduced[n_reduced++] = d;
            reduced_numel *= x->shape[d];
        } else {
            goto not_broadcast;
        }
    }
    if (n_reduced == 0) return gc_reshape(x, ndim, shape);

    /* Bring the reduced dims last (a copy, unless they are already), then sum them as one. */
    int perm[GC_MAX_DIMS];
    bool identity = true;
    for (int i = 0; i < n_kept; i++) perm[i] = kept[i];
    for (int i = 0; i < n_reduced; i++) perm[n_kept + i] = reduced[i];
    for (int d = 0; d < x->ndim; d++) identity = identity && perm[d] == d;
    gc_tensor *moved = identity ? gc_tensor_retain((gc_tensor *)x) : gc_permute(x, perm);
    kept_shape[n_kept] = reduced_numel;
    gc_tensor *grouped = gc_reshape(moved, n_kept + 1, kept_shape);
    gc_tensor *summed = gc_sum_last(grouped, false);
    gc_tensor *result = gc_reshape(summed, ndim, shape);
    gc_tensor_release(moved);
    gc_tensor_release(grouped);
    gc_tensor_release(summed);
    return result;

not_broadcast:
    gc_fatal("sum_to_shape: %s is not a broadcast of %s", gc_tensor_str(x, tx, sizeof tx),
             gc_shape_str(ndim, shape, target_text, sizeof target_text));
}
