/* Element types and the conversions between them.
 *
 * f16 (IEEE binary16) and bf16 (the top 16 bits of an f32) are stored as uint16_t bit
 * patterns; arithmetic on them is done in f32. Narrowing conversions round to nearest,
 * ties to even; inf and nan are preserved (nan stays a quiet nan); f16 subnormals are
 * produced and read exactly. */
#ifndef GRADCACHE_DTYPE_H
#define GRADCACHE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gc_dtype {
    GC_F32 = 0,
    GC_F16,
    GC_BF16,
    GC_I32,
    GC_F64, /* for gradient checks; both backends support it, slowly on purpose-built GPUs */
    GC_DTYPE_COUNT
} gc_dtype;

size_t gc_dtype_size(gc_dtype dtype);
const char *gc_dtype_name(gc_dtype dtype);
/* A dtype's name, or "an unknown dtype <value>" for a value no dtype has: for printing what
 * came from outside (a peer, a file), where an unknown value is the caller's error to report,
 * not a reason to stop. Writes into text [size]; returns text. */
const char *gc_dtype_describe(double value, char *text, size_t size);
/* True for the floating-point types (everything but i32). */
int gc_dtype_is_float(gc_dtype dtype);
/* The dtype arithmetic on `dtype` is done in: f32 for f16 and bf16, the dtype itself
 * otherwise. Losses, softmax and layernorm statistics and their gradients are computed in it. */
gc_dtype gc_working_dtype(gc_dtype dtype);

uint16_t gc_f32_to_f16(float value);
float gc_f16_to_f32(uint16_t bits);
uint16_t gc_f32_to_bf16(float value);
float gc_bf16_to_f32(uint16_t bits);
/* Element i of an array of `dtype` in host memory, as a double (exact for every dtype). */
double gc_element_f64(const void *elements, gc_dtype dtype, int64_t i);

#ifdef __cplusplus
}
#endif
#endif
