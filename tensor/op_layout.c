/* Gather and layout ops: embedding lookup, permute and transpose (contiguous copies),
 * concatenation along dim 0, and dtype conversion. */
#include <stdbool.h>
#include <stdio.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

/* table [V, D], ids [S...] i32 -> [S..., D] */
gc_tensor *gc_embedding(const gc_tensor *table, const gc_tensor *ids) {
    if (!table || !ids) return NULL;
    char tt[128], ti[128];
    gc_check_same_device("embedding", table, ids);
    gc_check_float("embedding", table);
    if (table->ndim != 2 || ids->dtype != GC_I32 || ids->ndim > GC_MAX_DIMS - 1)
        gc_fatal("embedding: needs a table [V, D] and i32 ids of at most %d dims, got %s and %s",
                 GC_MAX_DIMS - 1, gc_tensor_str(table, tt, sizeof tt), gc_tensor_str(ids, ti, sizeof ti));
    int64_t vocab = table->shape[0], dim = table->shape[1];
    int64_t shape[GC_MAX_DIMS];
    for (int d = 0; d < ids->ndim; d++) shape[d] = ids->shape[d];
    shape[ids->ndim] = dim;
    /* Checked on the device: a GPU never waits here for a verdict (see gc_check_index_range). */
    gc_check_index_range("embedding", "id", ids, vocab);
    gc_tensor *out = gc_empty(ids->ndim + 1, shape, table->dtype, table->device);
    if (!out) return NULL;
    gc_backend_for(out->device)->embedding(gc_data(table), gc_data(ids), gc_data(out), (size_t)gc_numel(ids),
                                           (size_t)vocab, (size_t)dim, table->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_EMBEDDING, .n_inputs = 2,
                                        .inputs = (const gc_tensor *[]){table, ids}, .output = out});
}

/* x [s0, ..., s(n-1)] -> [s(perm[0]), ..., s(perm[n-1])] */
gc_tensor *gc_permute(const gc_tensor *x, const int *perm) {
    if (!x) return NULL;
    char text[128];
    if (!perm && x->ndim) gc_fatal("permute: perm is NULL for %s", gc_tensor_str(x, text, sizeof text));
    gc_permute_args args = {.ndim = x->ndim};
    bool seen[GC_MAX_DIMS] = {false};
    int64_t shape[GC_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= x->ndim || seen[perm[i]]) {
            char list[64];
            int used = 0;
            for (int k = 0; k < x->ndim; k++)
                used += snprintf(list + used, sizeof list - (size_t)used, k ? ", %d" : "%d", perm[k]);
            gc_fatal("permute: (%s) is not a permutation of the dims of %s", list,
                     gc_tensor_str(x, text, sizeof text));
        }
        seen[perm[i]] = true;
        args.perm[i] = perm[i];
        args.in_shape[i] = x->shape[i];
        shape[i] = x->shape[perm[i]];
    }
    gc_tensor *y = gc_empty(x->ndim, shape, x->dtype, x->device);
    if (y) gc_backend_for(y->device)->permute(gc_data(x), gc_data(y), &args, gc_dtype_size(x->dtype));
    gc_op_record record = {.kind = GC_OP_PERMUTE, .n_inputs = 1, .inputs = (const gc_tensor *[]){x}, .output = y};
    for (int i = 0; i < x->ndim; i++) record.params.permute.perm[i] = perm[i];
    return gc_finish_op(&record);
}

gc_tensor *gc_transpose(const gc_tensor *x, int dim0, int dim1) {
    if (!x) return NULL;
    int dims[2] = {dim0, dim1};
    for (int k = 0; k < 2; k++) {
        if (dims[k] < 0) dims[k] += x->ndim;
        if (dims[k] < 0 || dims[k] >= x->ndim) {
            char text[128];
            gc_fatal("transpose: dim %d out of range for %s", k ? dim1 : dim0, gc_tensor_str(x, text, sizeof text));
        }
    }
    int perm[GC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) perm[d] = d;
    perm[dims[0]] = dims[1];
    perm[dims[1]] = dims[0];
    return gc_permute(x, perm);
}

/* tensors[i] [R_i, rest...] -> [sum R_i, rest...] */
gc_tensor *gc_cat0(gc_tensor *const *tensors, int count) {
    if (!tensors || count < 1) gc_fatal("cat0: needs an array of at least one tensor, got %d", count);
    for (int i = 0; i < count; i++)
        if (!tensors[i]) return NULL;
    const gc_tensor *first = tensors[0];
    int64_t shape[GC_MAX_DIMS];
    for (int d = 0; d < first->ndim; d++) shape[d] = first->shape[d];
    for (int i = 0; i < count; i++) {
        const gc_tensor *t = tensors[i];
        char ta[128], tb[128];
        bool same_rows_shape = t->ndim == first->ndim && t->ndim >= 1;
        for (int d = 1; same_rows_shape && d < t->ndim; d++) same_rows_shape = t->shape[d] == first->shape[d];
        if (!same_rows_shape || t->dtype != first->dtype || !gc_device_equal(t->device, first->device))
            gc_fatal("cat0: tensor %d is %s, tensor 0 is %s (need 1+ dims, one trailing shape, dtype and device)",
                     i, gc_tensor_str(t, ta, sizeof ta), gc_tensor_str(first, tb, sizeof tb));
        if (i) shape[0] += t->shape[0];
    }
    gc_tensor *out = gc_empty(first->ndim, shape, first->dtype, first->device);
    if (!out) return NULL;
    const gc_backend *backend = gc_backend_for(out->device);
    char *dst = gc_data(out);
    for (int i = 0; i < count; i++) {
        size_t nbytes = gc_nbytes(tensors[i]);
        backend->memcpy_same_device(dst, gc_data(tensors[i]), nbytes);
        dst += nbytes;
    }
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_CAT0, .n_inputs = count,
                                        .inputs = (const gc_tensor *const *)tensors, .output = out});
}

gc_tensor *gc_cast(const gc_tensor *x, gc_dtype dtype) {
    if (!x) return NULL;
    if ((int)dtype < 0 || dtype >= GC_DTYPE_COUNT) gc_fatal("cast: unknown dtype %d", (int)dtype);
    gc_tensor *y = dtype == x->dtype ? gc_clone(x) : gc_empty(x->ndim, x->shape, dtype, x->device);
    if (y && dtype != x->dtype)
        gc_backend_for(y->device)->cast(gc_data(x), x->dtype, gc_data(y), dtype, (size_t)gc_numel(y));
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_CAST, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                        .output = y});
}

gc_tensor *gc_to_working(const gc_tensor *x) {
    if (!x) return NULL;
    gc_dtype working = gc_working_dtype(x->dtype);
    return working == x->dtype ? gc_tensor_retain((gc_tensor *)x) : gc_cast(x, working);
}
