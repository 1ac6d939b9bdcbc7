/* The per-row and per-element arithmetic of RMSNorm (gc_rmsnorm), shared by the CPU kernels
 * (cpu/rmsnorm_cpu.c) and the CUDA ones (cuda/rmsnorm_cuda.cu), so that both backends run one
 * formula. Each backend sums a row's squares its own way (the CPU in double in four lanes,
 * CUDA in the working type across a block), so they agree to rounding, not bitwise.
 *
 * With rstd = 1 / sqrt(mean(x^2) + eps), xhat = x rstd and gw = g w:
 *   y = xhat w,   dx = rstd (gw - xhat mean(gw xhat)),   dw = sum over rows of g xhat.
 * (The mean(dxhat) term of layernorm's gradient is absent: nothing was subtracted.)
 *
 * C has no overloading: each function exists for T = float and T = double, named with a
 * _float or _double suffix; the CUDA templates reach them through overloads of their own. */
#ifndef GC_TENSOR_RMSNORM_IMPL_H
#define GC_TENSOR_RMSNORM_IMPL_H

#include <math.h>

#include "host_device.h"

/* SQRT is the sqrt of T (sqrtf for float, sqrt for double). */
#define GC_DEFINE_RMSNORM_ELEMENT(T, SQRT)                                                                 \
    /* 1 / sqrt(mean(x^2) + eps) of a row of `cols` elements whose squares sum to sum_squares */       \
    static inline GC_HD T gc_rmsnorm_rstd_##T(T sum_squares, T cols, T eps) {                            \
        return (T)1 / SQRT(sum_squares / cols + eps);                                                    \
    }                                                                                                    \
    /* one output element: x rstd w */                                                                   \
    static inline GC_HD T gc_rmsnorm_element_##T(T x, T rstd, T w) { return x * rstd * w; }            \
    /* one input-gradient element, gw = g w and mean_gw_xhat the row's mean of gw xhat */              \
    static inline GC_HD T gc_rmsnorm_dx_##T(T x, T gw, T rstd, T mean_gw_xhat) {                         \
        return rstd * (gw - x * rstd * mean_gw_xhat);                                                    \
    }

GC_DEFINE_RMSNORM_ELEMENT(float, sqrtf)
GC_DEFINE_RMSNORM_ELEMENT(double, sqrt)

#undef GC_DEFINE_RMSNORM_ELEMENT

#endif
