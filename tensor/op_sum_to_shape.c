/* gc_sum_to_shape: the inverse of broadcasting, composed of recorded ops, so that it is
 * itself differentiable.
 *
 * The reduced dims are summed as a row of reduce_last is (on the CPU in double, in the
 * row-major order of their indices, rounded once; on CUDA in the dtype's accumulator, in an
 * order fixed by the sizes), whichever way below is taken:
 *  - reduced dims that are one run of consecutive dims followed by kept ones (a bias
 *    gradient: [B, T, H] -> [H]) are summed in place by the backend's sum_middle: no
 *    transposed copy of the gradient;
 *  - otherwise they are moved last by a permute (a copy, unless they are last already)
 *    and summed as one row by sum_last. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

/* x summed over its dims [first, first + count) (not the last dim), with those dims
 * removed from the shape: x viewed as [outer, mid, inner] -> [outer, inner]. */
static gc_tensor *sum_dims(const gc_tensor *x, int first, int count) {
    int64_t shape[GC_MAX_DIMS], outer = 1, mid = 1, inner = 1;
    int ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d < first) outer *= x->shape[d];
        else if (d < first + count) mid *= x->shape[d];
        else inner *= x->shape[d];
        if (d < first || d >= first + count) shape[ndim++] = x->shape[d];
    }
    gc_tensor *out = gc_empty(ndim, shape, x->dtype, x->device);
    if (!out) return NULL;
    gc_backend_for(x->device)->sum_middle(gc_data(x), gc_data(out), (size_t)outer, (size_t)mid, (size_t)inner,
                                          x->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_SUM_DIMS, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                        .output = out, .params.sum_dims = {first, count}});
}

/* x with the dims `reduced` (n_reduced of them, increasing) moved last and summed as one
 * row: [kept..., reduced...] -> [kept...]. */
static gc_tensor *sum_moved_last(const gc_tensor *x, const int *kept, int n_kept, const int *reduced,
                                 int n_reduced) {
    int perm[GC_MAX_DIMS];
    int64_t grouped_shape[GC_MAX_DIMS], reduced_numel = 1;
    bool identity = true;
    for (int i = 0; i < n_kept; i++) {
        perm[i] = kept[i];
        grouped_shape[i] = x->shape[kept[i]];
    }
    for (int i = 0; i < n_reduced; i++) {
        perm[n_kept + i] = reduced[i];
        reduced_numel *= x->shape[reduced[i]];
    }
    for (int d = 0; d < x->ndim; d++) identity = identity && perm[d] == d;
    gc_tensor *moved = identity ? gc_tensor_retain((gc_tensor *)x) : gc_permute(x, perm);
    grouped_shape[n_kept] = reduced_numel;
    gc_tensor *grouped = gc_reshape(moved, n_kept + 1, grouped_shape);
    gc_tensor *summed = gc_sum_last(grouped, false);
    gc_tensor_release(moved);
    gc_tensor_release(grouped);
    return summed;
}

gc_tensor *gc_sum_to_shape(const gc_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    char tx[128], target_text[96];
    if (ndim > x->ndim) goto not_broadcast;
    /* The target right-aligned on x's dims; a dim is reduced where the target has 1. */
    int pad = x->ndim - ndim;
    int kept[GC_MAX_DIMS], reduced[GC_MAX_DIMS], n_kept = 0, n_reduced = 0;
    for (int d = 0; d < x->ndim; d++) {
        int64_t target = d < pad ? 1 : shape[d - pad];
        if (target == x->shape[d]) kept[n_kept++] = d;
        else if (target == 1) reduced[n_reduced++] = d;
        else goto not_broadcast;
    }
    if (n_reduced == 0) return gc_reshape(x, ndim, shape);

    /* In place when a kept dim follows the run of reduced ones (else they are last already). */
    int first = reduced[0];
    bool one_run = reduced[n_reduced - 1] == first + n_reduced - 1;
    bool in_place = one_run && n_kept > 0 && kept[n_kept - 1] > first;
    gc_tensor *summed = in_place ? sum_dims(x, first, n_reduced) : sum_moved_last(x, kept, n_kept, reduced, n_reduced);
    gc_tensor *result = gc_reshape(summed, ndim, shape);
    gc_tensor_release(summed);
    return result;

not_broadcast:
    gc_fatal("sum_to_shape: %s is not a broadcast of %s", gc_tensor_str(x, tx, sizeof tx),
             gc_shape_str(ndim, shape, target_text, sizeof target_text));
}
