/* The multi-tensor finiteness check on CUDA: one launch scans up to GC_SPANS_PER_LAUNCH
 * arrays, whatever their sizes, instead of a launch per tensor. The arrays travel in the
 * kernel's parameters (no device table to allocate); each array is cut into tasks of
 * GC_SPAN_TASK_ELEMENTS elements, the tasks of all arrays are numbered one after the other,
 * and block b takes tasks b, b + gridDim.x, ... finding each task's array by a binary search
 * (../finite_impl.h, shared with the CPU and tested there). A block that sees an inf or a
 * nan writes 1 to the flag: every writer writes the same value, so the race is harmless. */
#include <algorithm>

#include "../finite_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* Arrays per launch: 12 KiB of parameters, inside the 32 KiB a kernel may take since CUDA
 * 12.1 on Volta and later. A model with more parameter tensors takes several launches. */
#define GC_SPANS_PER_LAUNCH 512

struct span_batch {
    int count;
    const void *data[GC_SPANS_PER_LAUNCH];
    int64_t numel[GC_SPANS_PER_LAUNCH];
    int64_t first_task[GC_SPANS_PER_LAUNCH + 1]; /* [count + 1]: see gc_span_of_task */
    int8_t dtype[GC_SPANS_PER_LAUNCH];
};
static_assert(sizeof(span_batch) <= 32764, "a kernel's parameters are at most 32764 bytes");

/* __grid_constant__: the batch is read where the launch put it, never copied per thread. */
__global__ void nonfinite_kernel(const __grid_constant__ span_batch batch, int32_t *flag) {
    const int64_t tasks = batch.first_task[batch.count];
    for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
        int s = gc_span_of_task(batch.first_task, batch.count, task);
        int64_t begin = (task - batch.first_task[s]) * GC_SPAN_TASK_ELEMENTS;
        int64_t end = begin + GC_SPAN_TASK_ELEMENTS < batch.numel[s] ? begin + GC_SPAN_TASK_ELEMENTS : batch.numel[s];
        if (gc_range_nonfinite(batch.data[s], (gc_dtype)batch.dtype[s], begin + threadIdx.x, end, blockDim.x))
            *flag = 1;
    }
}

} // namespace

extern "C" void gc_cuda_nonfinite_check(const gc_span *spans, int count, int32_t *flag) {
    span_batch batch; /* 12 KiB: static storage would do as well, but the host stack has room */
    for (int first = 0; first < count; first += GC_SPANS_PER_LAUNCH) {
        batch.count = std::min(count - first, GC_SPANS_PER_LAUNCH);
        batch.first_task[0] = 0;
        for (int s = 0; s < batch.count; s++) {
            const gc_span *span = &spans[first + s];
            batch.data[s] = span->data;
            batch.numel[s] = span->numel;
            batch.dtype[s] = (int8_t)span->dtype;
            batch.first_task[s + 1] = batch.first_task[s] + gc_span_tasks(span->numel);
        }
        GC_CUDA_LAUNCH(nonfinite_kernel, gc_row_blocks((size_t)batch.first_task[batch.count]), batch, flag); // a block per task
    }
}
