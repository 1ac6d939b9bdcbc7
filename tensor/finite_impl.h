/* The arithmetic of the multi-tensor finiteness check (tensor/backend.h, nonfinite_check),
 * shared by the CPU kernel (cpu/finite_cpu.c) and the CUDA kernel (cuda/finite_cuda.cu), so
 * that the CPU tests run the code a GPU runs: the test of one element, the scan of a range,
 * and how the work over many arrays is cut into tasks and a task found again.
 *
 * An element is inf or nan when its exponent bits are all ones. f16 and bf16 are tested on
 * their bits (they are stored as uint16_t on both backends); f32 and f64 with isfinite, which
 * reads the same bits. No flag of the floating-point environment is involved, so the test is
 * exact on both backends whatever the rounding or flush-to-zero mode. */
#ifndef GC_TENSOR_FINITE_IMPL_H
#define GC_TENSOR_FINITE_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "host_device.h"

/* Elements per task: one CUDA block's share of an array per pass (64 Ki: enough to amortise
 * finding the task, small enough that a large array spreads over every SM). */
#define GC_SPAN_TASK_ELEMENTS 65536

/* Whether any of the elements begin, begin + step, ... below end of the array `data` of
 * `dtype` (a floating dtype) is inf or nan. step > 0. */
static inline GC_HD bool gc_range_nonfinite(const void *data, gc_dtype dtype, int64_t begin, int64_t end,
                                            int64_t step) {
    bool found = false;
    switch (dtype) {
    case GC_F32:
        for (int64_t i = begin; i < end; i += step) found |= !isfinite(((const float *)data)[i]);
        break;
    case GC_F64:
        for (int64_t i = begin; i < end; i += step) found |= !isfinite(((const double *)data)[i]);
        break;
    case GC_F16: /* exponent 0x7C00: inf (mantissa 0) or nan */
        for (int64_t i = begin; i < end; i += step) found |= (((const uint16_t *)data)[i] & 0x7C00u) == 0x7C00u;
        break;
    case GC_BF16: /* f32's exponent, 0x7F80 in the top 16 bits */
        for (int64_t i = begin; i < end; i += step) found |= (((const uint16_t *)data)[i] & 0x7F80u) == 0x7F80u;
        break;
    default: break; /* i32 has no inf or nan; the front-end refuses it anyway */
    }
    return found;
}

/* The tasks an array of n elements is cut into: ceil(n / GC_SPAN_TASK_ELEMENTS). */
static inline GC_HD int64_t gc_span_tasks(int64_t n) {
    return (n + GC_SPAN_TASK_ELEMENTS - 1) / GC_SPAN_TASK_ELEMENTS;
}

/* The array that task `task` belongs to, when the tasks of `count` arrays are numbered one
 * array after the other and first_task[s] is the number of the first task of array s
 * (first_task[0] = 0, non-decreasing; an empty array has no task, so its first_task equals
 * the next array's). That is the last s with first_task[s] <= task: a binary search, so a
 * block finds its array in log2(count) steps whatever the sizes. task < the total. */
static inline GC_HD int gc_span_of_task(const int64_t *first_task, int count, int64_t task) {
    int low = 0, high = count - 1; /* the answer is in [low, high]; first_task[low] <= task */
    while (low < high) {
        int middle = low + (high - low + 1) / 2;
        if (first_task[middle] <= task) low = middle;
        else high = middle - 1;
    }
    return low;
}

#endif
