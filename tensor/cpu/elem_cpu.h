/* Reading and writing one element of any dtype as a double, for the CPU kernels whose
 * speed does not matter as much as their clarity. The hot kernels (matmul, and the f32
 * paths of the elementwise ones) work on float arrays directly. */
#ifndef GC_TENSOR_ELEM_CPU_H
#define GC_TENSOR_ELEM_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "gradcache/dtype.h"

static inline double gc_load(const void *data, gc_dtype dtype, size_t i) {
    switch (dtype) {
    case GC_F32: return ((const float *)data)[i];
    case GC_F16: return gc_f16_to_f32(((const uint16_t *)data)[i]);
    case GC_BF16: return gc_bf16_to_f32(((const uint16_t *)data)[i]);
    case GC_I32: return ((const int32_t *)data)[i];
    case GC_F64: return ((const double *)data)[i];
    default: return 0;
    }
}

/* f16 and bf16 round twice here (double -> f32 -> 16 bits); kernels that need one
 * rounding compute in float and store through the float path. */
static inline void gc_store(void *data, gc_dtype dtype, size_t i, double value) {
    switch (dtype) {
    case GC_F32: ((float *)data)[i] = (float)value; break;
    case GC_F16: ((uint16_t *)data)[i] = gc_f32_to_f16((float)value); break;
    case GC_BF16: ((uint16_t *)data)[i] = gc_f32_to_bf16((float)value); break;
    case GC_I32: ((int32_t *)data)[i] = (int32_t)value; break;
    case GC_F64: ((double *)data)[i] = value; break;
    default: break;
    }
}

#endif
