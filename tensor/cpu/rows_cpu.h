/* Rows of any dtype read and written as doubles, a chunk at a time, for the row kernels
 * (reductions, softmax, layernorm) that accumulate in double.
 *
 * Working on a chunk in a small stack buffer keeps the math in one place for every dtype
 * without allocating anything (kernels never fail), and lets the f32 path, which runs in
 * CPU training, convert a whole chunk in a plain loop the compiler vectorises. */
#ifndef GC_TENSOR_ROWS_CPU_H
#define GC_TENSOR_ROWS_CPU_H

#include <stddef.h>

#include "elem_cpu.h"

/* Elements per chunk: 2 KiB of doubles, a few of which fit in L1 beside the data. */
#define GC_CPU_CHUNK 256

/* Length of the chunk that starts at `start` in a row of `cols` elements. */
static inline size_t gc_chunk_len(size_t cols, size_t start) {
    return cols - start < GC_CPU_CHUNK ? cols - start : GC_CPU_CHUNK;
}

/* out[j] = data[first + j] for j < n (n <= GC_CPU_CHUNK). */
static inline void gc_load_span(const void *data, gc_dtype dtype, size_t first, size_t n, double *out) {
    if (dtype == GC_F32) {
        const float *x = (const float *)data + first;
        for (size_t j = 0; j < n; j++) out[j] = x[j];
        return;
    }
    for (size_t j = 0; j < n; j++) out[j] = gc_load(data, dtype, first + j);
}

/* data[first + j] = values[j] for j < n, each rounded once to dtype. */
static inline void gc_store_span(void *data, gc_dtype dtype, size_t first, size_t n, const double *values) {
    if (dtype == GC_F32) {
        float *y = (float *)data + first;
        for (size_t j = 0; j < n; j++) y[j] = (float)values[j];
        return;
    }
    for (size_t j = 0; j < n; j++) gc_store(data, dtype, first + j, values[j]);
}

/* Sums in double are kept in GC_SUM_LANES running sums, element j of a row going to lane
 * j mod GC_SUM_LANES, and the lanes added at the end as (l0 + l1) + (l2 + l3): independent
 * additions overlap (and vectorise) where one running sum would wait on each addition in
 * turn, and the order is fixed by the row alone, so the result does not depend on the
 * threads. Every CPU kernel that sums a row does it this way, so that they agree bitwise. */
#define GC_SUM_LANES 4

/* lanes[j mod GC_SUM_LANES] += v[j] for j < n; v's first element is element `first` of its
 * row, first a multiple of GC_SUM_LANES (a chunk start). */
static inline void gc_add_to_lanes(const double *v, size_t n, double lanes[GC_SUM_LANES]) {
    size_t j = 0;
    for (; j + GC_SUM_LANES <= n; j += GC_SUM_LANES)
        for (int lane = 0; lane < GC_SUM_LANES; lane++) lanes[lane] += v[j + (size_t)lane];
    for (; j < n; j++) lanes[j % GC_SUM_LANES] += v[j];
}

_Static_assert(GC_SUM_LANES == 4, "gc_lanes_total and sum_middle's columns add four lanes");

static inline double gc_lanes_total(const double lanes[GC_SUM_LANES]) {
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

/* The sum of data[first .. first + n) in double (0 for n = 0). */
static inline double gc_sum_span(const void *data, gc_dtype dtype, size_t first, size_t n) {
    double chunk[GC_CPU_CHUNK], lanes[GC_SUM_LANES] = {0};
    for (size_t start = 0; start < n; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(n, start);
        gc_load_span(data, dtype, first + start, len, chunk);
        gc_add_to_lanes(chunk, len, lanes);
    }
    return gc_lanes_total(lanes);
}

#endif
