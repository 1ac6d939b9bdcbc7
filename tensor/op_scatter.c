/* The scatters backward rules use (op_internal.h): the transposes of a gather. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"

gc_tensor *gc_scatter_last(const gc_tensor *src, const gc_tensor *index, int64_t cols) {
    if (!src || !index) return NULL;
    char ts[128], ti[128];
    gc_check_same_device("scatter_last", src, index);
    gc_check_float("scatter_last", src);
    if (src->ndim != 1 || index->dtype != GC_I32 || !gc_same_shape(src, index))
        gc_fatal("scatter_last: needs src [rows] and i32 index [rows], got %s and %s", gc_tensor_str(src, ts, sizeof ts),
                 gc_tensor_str(index, ti, sizeof ti));
    gc_tensor *out = gc_zeros(GC_SHAPE(src->shape[0], cols), src->dtype, src->device);
    if (out)
        gc_backend_for(out->device)->scatter_last(gc_data(src), gc_data(index), gc_data(out), (size_t)src->shape[0],
                                                  (size_t)cols, src->dtype);
    return out;
}

gc_tensor *gc_embedding_backward(const gc_tensor *grad_out, const gc_tensor *ids, int64_t vocab) {
    if (!grad_out || !ids) return NULL;
    char tg[128], ti[128];
    gc_check_same_device("embedding_backward", grad_out, ids);
    gc_check_float("embedding_backward", grad_out);
    int64_t dim = gc_last_dim(grad_out);
    if (ids->dtype != GC_I32 || gc_numel(ids) * dim != gc_numel(grad_out))
        gc_fatal("embedding_backward: grad %s does not match ids %s", gc_tensor_str(grad_out, tg, sizeof tg),
                 gc_tensor_str(ids, ti, sizeof ti));
    /* summed in the working dtype, then rounded once: an f16 or bf16 row that many ids share
     * (a padding token's, say) would otherwise round at every addition */
    gc_tensor *table = gc_zeros(GC_SHAPE(vocab, dim), gc_working_dtype(grad_out->dtype), grad_out->device);
    if (!table) return NULL;
    gc_backend_for(table->device)->embedding_backward(gc_data(grad_out), gc_data(ids), gc_data(table),
                                                      (size_t)gc_numel(ids), (size_t)vocab, (size_t)dim,
                                                      grad_out->dtype);
    if (table->dtype == grad_out->dtype) return table;
    gc_tensor *rounded = gc_cast(table, grad_out->dtype);
    gc_tensor_release(table);
    return rounded;
}
