/* The AdamW update of f32 parameters without a master copy (the CPU training case) as one
 * loop over plain arrays, written once for the portable build (optim_cpu.c) and the
 * AVX2 + FMA one (adamw_avx2.c), chosen at run time. With FMA in the instruction set, fmaf
 * is one instruction and the loop vectorises; the portable build calls libm's fmaf, which
 * rounds once too. Every step is a correctly rounded IEEE operation (../optim_impl.h), so
 * the two give the same bits: tests/test_optim.c compares them. */
#ifndef GC_TENSOR_ADAMW_CPU_H
#define GC_TENSOR_ADAMW_CPU_H

#include <stddef.h>

#include "../optim_impl.h"

/* param, grad, exp_avg, exp_avg_sq [n]: one AdamW step of each element */
static inline void gc_adamw_f32_loop(float *restrict param, const float *restrict grad, float *restrict exp_avg,
                                     float *restrict exp_avg_sq, size_t n, gc_adamw_hyper hyper) {
    for (size_t i = 0; i < n; i++)
        param[i] = gc_adamw_element_float(param[i], grad[i], &exp_avg[i], &exp_avg_sq[i], hyper);
}

/* adamw_avx2.c: the same loop built with -mavx2 -mfma (call only where the CPU has both). */
void gc_adamw_f32_loop_avx2(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                            gc_adamw_hyper hyper);

#endif
