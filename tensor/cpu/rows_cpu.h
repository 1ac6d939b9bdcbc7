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

/* The sum of data[first .. first + n) in double (0 for n = 0). */
static inline double gc_sum_span(const void *data, gc_dtype dtype, size_t first, size_t n) {
    double chunk[GC_CPU_CHUNK], sum = 0.0;
    for (size_t start = 0; start < n; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(n, start);
        gc_load_span(data, dtype, first + start, len, chunk);
        for (size_t j = 0; j < len; j++) sum += chunk[j];
    }
    return sum;
}

#endif
