/* gc_any_nonfinite: one pass over many tensors for an inf or a nan (the loss scaler's check
 * of every gradient at once). */
#include <stdlib.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"

gc_tensor *gc_any_nonfinite(gc_tensor *const *tensors, int count) {
    if (count < 1) gc_fatal("any_nonfinite: %d tensors (at least 1 is needed)", count);
    for (int i = 0; i < count; i++) {
        if (!tensors[i]) return NULL;
        gc_check_float("any_nonfinite", tensors[i]);
        gc_check_same_device("any_nonfinite", tensors[0], tensors[i]);
    }
    gc_tensor *flag = gc_zeros(0, NULL, GC_I32, tensors[0]->device);
    if (!flag) return NULL;
    gc_span *spans = malloc((size_t)count * sizeof *spans);
    if (!spans) gc_fatal("any_nonfinite: out of host memory for %d tensors", count);
    for (int i = 0; i < count; i++) spans[i] = (gc_span){gc_data(tensors[i]), gc_numel(tensors[i]), tensors[i]->dtype};
    gc_backend_for(flag->device)->nonfinite_check(spans, count, gc_data(flag));
    free(spans);
    return flag;
}
