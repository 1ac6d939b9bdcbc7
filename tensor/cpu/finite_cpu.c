/* The multi-tensor finiteness check on the CPU: every span scanned in order, stopping at the
 * first inf or nan. The test of an element is ../finite_impl.h's, shared with CUDA. */
#include "../finite_impl.h"
#include "kernels_cpu.h"

void gc_cpu_nonfinite_check(const gc_span *spans, int count, int32_t *flag) {
    for (int s = 0; s < count; s++) {
        /* in tasks, as the GPU cuts them, so that a found value ends the scan early */
        for (int64_t begin = 0; begin < spans[s].numel; begin += GC_SPAN_TASK_ELEMENTS) {
            int64_t end = begin + GC_SPAN_TASK_ELEMENTS < spans[s].numel ? begin + GC_SPAN_TASK_ELEMENTS : spans[s].numel;
            if (gc_range_nonfinite(spans[s].data, spans[s].dtype, begin, end, 1)) {
                *flag = 1;
                return;
            }
        }
    }
}
