/* The f32 gelu loops of gelu_cpu.h (the activation, its derivative, and the derivative
 * times the incoming gradient) built with AVX2 (this file is compiled with -mavx2 and
 * -ffp-contract=off, and called only after a run-time check: see cpu_isa.c): eight floats
 * per instruction where the baseline build has four, the same bits. */
#include "gelu_cpu.h"

void gc_gelu_erf_loop_avx2(bool derivative, const float *x, float *y, size_t n) {
    gc_gelu_erf_loop(derivative, x, y, n);
}

void gc_gelu_erf_grad_loop_avx2(const float *x, const float *g, float *dx, size_t n) {
    gc_gelu_erf_grad_loop(x, g, dx, n);
}
