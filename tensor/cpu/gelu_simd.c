/* The f32 gelu loops of gelu_cpu.h (the activation, its derivative, and the derivative
 * times the incoming gradient) built for a SIMD instruction set: this file is compiled once
 * per set, with -mavx2 (eight floats per instruction where the baseline build has four) and
 * with -mavx512f (sixteen), each with -ffp-contract=off and GC_SIMD_ISA naming the set (see
 * tensor/meson.build), and called only after a run-time check (cpu_isa.c). The same C,
 * so the same bits as the portable loop. */
#include "gelu_cpu.h"

#define NAMED_(name, isa) name##_##isa
#define NAMED(name, isa) NAMED_(name, isa)

void NAMED(gc_gelu_erf_loop, GC_SIMD_ISA)(bool derivative, const float *x, float *y, size_t n) {
    gc_gelu_erf_loop(derivative, x, y, n);
}

void NAMED(gc_gelu_erf_grad_loop, GC_SIMD_ISA)(const float *x, const float *g, float *dx, size_t n) {
    gc_gelu_erf_grad_loop(x, g, dx, n);
}
