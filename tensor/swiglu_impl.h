/* The per-element arithmetic of SwiGLU's gated product (gc_swiglu), silu(gate) up with
 * silu(x) = x sigmoid(x), shared by the CPU kernels (cpu/swiglu_cpu.c) and the CUDA ones
 * (cuda/swiglu_cuda.cu). Each backend instantiates it with its own e^y for y <= 0 (the CPU's
 * float one vectorises, glibc's expf does not; CUDA's expf), so the two agree to a few ulps.
 *
 * sigmoid(x) is computed from e = e^-|x|, which never overflows: 1 / (1 + e) for x >= 0 and
 * e / (1 + e) below. With s = sigmoid(gate):
 *   out = gate s up,   d gate = g up s (1 + gate (1 - s)),   d up = g gate s. */
#ifndef GC_TENSOR_SWIGLU_IMPL_H
#define GC_TENSOR_SWIGLU_IMPL_H

#include "host_device.h"

/* EXP_NONPOSITIVE(y) is e^y of T for y <= 0. Defines gc_sigmoid_T, gc_swiglu_T and
 * gc_swiglu_grad_T in the including file. */
#define GC_DEFINE_SWIGLU_ELEMENT(T, EXP_NONPOSITIVE)                                                       \
    static inline GC_HD T gc_sigmoid_##T(T x) {                                                          \
        T e = EXP_NONPOSITIVE(x < (T)0 ? x : -x);                                                        \
        return (x < (T)0 ? e : (T)1) / ((T)1 + e);                                                       \
    }                                                                                                    \
    static inline GC_HD T gc_swiglu_##T(T gate, T up) { return gate * gc_sigmoid_##T(gate) * up; }     \
    static inline GC_HD void gc_swiglu_grad_##T(T gate, T up, T g, T *d_gate, T *d_up) {               \
        T s = gc_sigmoid_##T(gate);                                                                      \
        *d_gate = g * up * s * ((T)1 + gate * ((T)1 - s));                                               \
        *d_up = g * gate * s;                                                                            \
    }

#endif
