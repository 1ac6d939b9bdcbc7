/* Reading and writing one element of any dtype as a double, for the CPU kernels whose
 * speed does not matter as much as their clarity. The hot kernels (matmul, and the f32
 * paths of the elementwise ones) work on float arrays directly. */
#ifndef GC_TENSOR_ELEM_CPU_H
#define GC_TENSOR_ELEM_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* value rounded to f32 "to odd": the f32 next to it toward zero, with the last mantissa
 * bit set when value is not exact. Rounding that to nearest even in a format at least two
 * bits narrower (f16: 11 bits, bf16: 8, against f32's 24) gives the same result as
 * rounding value directly (Boldo and Melquiond, IEEE Trans. Computers 57(4), 2008),
 * whereas plain double -> f32 -> 16 bits can round twice: 1 + 2^-8 + 2^-32 becomes the
 * bf16 tie 1 + 2^-8 in f32 and then 1, where one rounding gives 1 + 2^-7. */
static inline float gc_f64_to_f32_odd(double value) {
    float nearest = (float)value;
    if ((double)nearest == value || isnan(value)) return nearest;
    float toward_zero = fabs((double)nearest) > fabs(value) ? nextafterf(nearest, 0.0f) : nearest;
    uint32_t bits;
    memcpy(&bits, &toward_zero, sizeof bits);
    bits |= 1u;
    memcpy(&toward_zero, &bits, sizeof bits);
    return toward_zero;
}

/* Every dtype is rounded once from the double (i32 truncates toward zero, as in C). */
static inline void gc_store(void *data, gc_dtype dtype, size_t i, double value) {
    switch (dtype) {
    case GC_F32: ((float *)data)[i] = (float)value; break;
    case GC_F16: ((uint16_t *)data)[i] = gc_f32_to_f16(gc_f64_to_f32_odd(value)); break;
    case GC_BF16: ((uint16_t *)data)[i] = gc_f32_to_bf16(gc_f64_to_f32_odd(value)); break;
    case GC_I32: ((int32_t *)data)[i] = (int32_t)value; break;
    case GC_F64: ((double *)data)[i] = value; break;
    default: break;
    }
}

#endif
