/* The per-element arithmetic of the fused optimizer updates (tensor/backend.h), shared by
 * the CPU kernels (cpu/optim_cpu.c) and the CUDA kernels (cuda/optim_cuda.cu), so that
 * the two backends run one formula.
 *
 * They agree bit for bit: every step is an IEEE 754 operation that both round correctly
 * (+, -, *, /, sqrt, fma and the conversions), in the same order. nvcc contracts a * b + c
 * into one fma by default and gcc in ISO C mode does not, so every multiply-add is an
 * explicit fma and no other product feeds an addition.
 *
 * Each function takes one parameter element p and its stored gradient g in the working type
 * T (float for f32, f16 and bf16; double for f64), multiplies g by the step's grad_scale
 * (exact when it is 1; a loss scaler's unscaling, done here in f32 rather than in place in
 * a 16-bit gradient, where small values would flush to zero), updates the element's f32
 * state in place and returns the new parameter value. The kernel rounds that once into the
 * parameter's dtype, or, for a parameter with an f32 master copy, stores it into the master
 * (p was read from there) and rounds it into the parameter. The state is rounded to f32
 * when stored; the parameter update uses the unrounded value of this step. */
#ifndef GC_TENSOR_OPTIM_IMPL_H
#define GC_TENSOR_OPTIM_IMPL_H

#include <math.h>

#include "op_params.h"
#include "host_device.h"

/* FMA and SQRT are the functions of T (fmaf and sqrtf for float, fma and sqrt for double):
 * plain C has no overloads, and the CUDA device library has the same names. */
#define GC_DEFINE_OPTIM_ELEMENT(T, FMA, SQRT)                                                              \
    /* g' = g + wd p; buf = g' at the buffer's first step, else momentum buf + g'; p - lr buf.          \
     * buf is not touched (and may be NULL) when momentum is 0: p - lr g'. */                          \
    static inline GC_HD T gc_sgd_element_##T(T p, T g, float *buf, gc_sgd_hyper h) {                    \
        g *= (T)h.grad_scale;                                                                            \
        T d = FMA((T)h.weight_decay, p, g);                                                              \
        if (h.momentum != 0) {                                                                           \
            if (!h.first_step) d = FMA((T)h.momentum, (T)*buf, d);                                       \
            *buf = (float)d;                                                                             \
        }                                                                                                \
        return FMA(-(T)h.lr, d, p);                                                                      \
    }                                                                                                    \
    /* Decoupled decay p - lr wd p first (it uses the old p, as PyTorch's AdamW); then                 \
     * m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2 and p - lr (m / bc1) / (sqrt(v / bc2) + eps). */  \
    static inline GC_HD T gc_adamw_element_##T(T p, T g, float *exp_avg, float *exp_avg_sq,             \
                                               gc_adamw_hyper h) {                                       \
        g *= (T)h.grad_scale;                                                                            \
        p = FMA(-(T)h.lr * (T)h.weight_decay, p, p);                                                     \
        T m = FMA((T)h.beta1, (T)*exp_avg, ((T)1 - (T)h.beta1) * g);                                     \
        T v = FMA((T)h.beta2, (T)*exp_avg_sq, ((T)1 - (T)h.beta2) * g * g);                              \
        *exp_avg = (float)m;                                                                             \
        *exp_avg_sq = (float)v;                                                                          \
        T step = (m / (T)h.bias_correction1) / (SQRT(v / (T)h.bias_correction2) + (T)h.eps);             \
        return FMA(-(T)h.lr, step, p);                                                                   \
    }

GC_DEFINE_OPTIM_ELEMENT(float, fmaf, sqrtf)
GC_DEFINE_OPTIM_ELEMENT(double, fma, sqrt)

#undef GC_DEFINE_OPTIM_ELEMENT

#endif
