/* The f32 layernorm rows of layernorm_cpu.h built with AVX2 (this file is compiled with
 * -mavx2 and -ffp-contract=off, and called only after a run-time check: see cpu_isa.c): four
 * doubles per instruction where the baseline build has two, the same bits. */
#include "layernorm_cpu.h"

void gc_layernorm_row_f32_avx2(const float *x, const float *gamma, const float *beta, float *y, size_t cols,
                               double eps, double *mean, double *rstd) {
    gc_layernorm_row_f32(x, gamma, beta, y, cols, eps, mean, rstd);
}

void gc_layernorm_grad_row_f32_avx2(const float *x, const float *gamma, const float *g, float *dx, float *g_xhat,
                                    size_t cols, double eps) {
    gc_layernorm_grad_row_f32(x, gamma, g, dx, g_xhat, cols, eps);
}
