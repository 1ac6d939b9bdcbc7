/* The per-element arithmetic of rotary position embeddings (gc_rope), shared by the CPU
 * kernel (cpu/rope_cpu.c) and the CUDA one (cuda/rope_cuda.cu). They agree bitwise: each
 * product is rounded on its own before the sum, as transformers computes
 * q cos + rotate_half(q) sin, and nvcc, which would contract a product into the following
 * addition (an fma, rounded once), is kept from it by its explicitly rounded multiplies.
 *
 * Element i < Dh/2 of a head is paired with element i + Dh/2 (the "rotate half" layout of
 * Llama, Mistral and Qwen, not GPT-J's interleaved pairs), and the pair rotated by the angle
 * of its position and frequency i. The inverse rotation, the backward, negates the sine. */
#ifndef GC_TENSOR_ROPE_IMPL_H
#define GC_TENSOR_ROPE_IMPL_H

#include <stdbool.h>

#include "host_device.h"

#ifdef __CUDA_ARCH__
#define GC_ROPE_MUL_float(a, b) __fmul_rn(a, b)
#define GC_ROPE_MUL_double(a, b) __dmul_rn(a, b)
#else
#define GC_ROPE_MUL_float(a, b) ((a) * (b))
#define GC_ROPE_MUL_double(a, b) ((a) * (b))
#endif

#define GC_DEFINE_ROPE_ELEMENT(T)                                                                          \
    /* (a, b) = (x[i], x[i + Dh/2]) rotated by the angle of cosine c and sine s (back when inverse) */ \
    static inline GC_HD void gc_rope_pair_##T(T a, T b, T c, T s, bool inverse, T *ya, T *yb) {        \
        if (inverse) s = -s;                                                                             \
        *ya = GC_ROPE_MUL_##T(a, c) - GC_ROPE_MUL_##T(b, s);                                             \
        *yb = GC_ROPE_MUL_##T(b, c) + GC_ROPE_MUL_##T(a, s);                                             \
    }

GC_DEFINE_ROPE_ELEMENT(float)
GC_DEFINE_ROPE_ELEMENT(double)

#undef GC_DEFINE_ROPE_ELEMENT

#endif
