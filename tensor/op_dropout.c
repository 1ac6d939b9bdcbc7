/* gc_dropout: the mask comes from Philox at (seed, offset + element index), so it is the
 * same on every device and can be regenerated for the backward pass. gc_dropout_rows: the
 * same for rows that stand for rows of a larger tensor (a padded batch's real tokens). */
#include <math.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

/* The threshold of the 24-bit uniform (word >> 8) at or above which an element is kept:
 * P(keep) = 1 - p to 2^-24. */
static uint32_t keep_threshold(const char *op, const gc_tensor *x, double p) {
    char text[128];
    gc_check_float(op, x);
    if (!(p >= 0 && p < 1)) gc_fatal("%s: p = %g outside [0, 1) for %s", op, p, gc_tensor_str(x, text, sizeof text));
    return (uint32_t)ceil(p * 16777216.0);
}

gc_tensor *gc_dropout(const gc_tensor *x, double p, uint64_t seed, uint64_t offset) {
    if (!x) return NULL;
    uint32_t threshold = keep_threshold("dropout", x, p);
    gc_tensor *y = gc_empty_like(x);
    if (y)
        gc_backend_for(x->device)->dropout(gc_data(x), gc_data(y), (size_t)gc_numel(x), x->dtype, threshold,
                                           1.0 / (1.0 - p), seed, offset);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_DROPOUT, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                        .output = y, .params.dropout = {p, seed, offset}});
}

gc_tensor *gc_dropout_rows(const gc_tensor *x /* [N, D] */, const gc_tensor *positions /* i32 [N] */, double p,
                           uint64_t seed, uint64_t offset) {
    if (!x || !positions) return NULL;
    uint32_t threshold = keep_threshold("dropout_rows", x, p);
    char tx[128], tp[128];
    if (x->ndim != 2 || positions->ndim != 1 || positions->dtype != GC_I32 || positions->shape[0] != x->shape[0] ||
        !gc_device_equal(x->device, positions->device))
        gc_fatal("dropout_rows: x %s is not [N, D] or positions %s not i32 [N] on its device",
                 gc_tensor_str(x, tx, sizeof tx), gc_tensor_str(positions, tp, sizeof tp));
    gc_tensor *y = gc_empty_like(x);
    if (y)
        gc_backend_for(x->device)->dropout_rows(gc_data(x), gc_data(y), (size_t)x->shape[0], (size_t)x->shape[1],
                                                gc_data(positions), x->dtype, threshold, 1.0 / (1.0 - p), seed,
                                                offset);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_DROPOUT, .n_inputs = 2,
                                        .inputs = (const gc_tensor *[]){x, positions}, .output = y,
                                        .params.dropout = {p, seed, offset}});
}
