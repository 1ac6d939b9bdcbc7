/* gc_dropout: the mask comes from Philox at (seed, offset + element index), so it is the
 * same on every device and can be regenerated for the backward pass. */
#include <math.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

gc_tensor *gc_dropout(const gc_tensor *x, double p, uint64_t seed, uint64_t offset) {
    if (!x) return NULL;
    char text[128];
    gc_check_float("dropout", x);
    if (!(p >= 0 && p < 1)) gc_fatal("dropout: p = %g outside [0, 1) for %s", p, gc_tensor_str(x, text, sizeof text));
    /* keep when the 24-bit uniform (word >> 8) is at least p 2^24: P(keep) = 1 - p to 2^-24 */
    uint32_t threshold = (uint32_t)ceil(p * 16777216.0);
    gc_tensor *y = gc_empty_like(x);
    if (y)
        gc_backend_for(x->device)->dropout(gc_data(x), gc_data(y), (size_t)gc_numel(x), x->dtype, threshold,
                                           1.0 / (1.0 - p), seed, offset);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_DROPOUT, .n_inputs = 1, .inputs = (const gc_tensor *[]){x},
                                        .output = y, .params.dropout = {p, seed, offset}});
}
