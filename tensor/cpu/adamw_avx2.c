/* The f32 AdamW loop of adamw_cpu.h built with AVX2 and FMA (this file is compiled with
 * -mavx2 -mfma -fno-math-errno, and called only after a run-time check: see cpu_isa.c):
 * fmaf and sqrtf become instructions and the loop runs eight elements at a time, with the
 * portable loop's bits. */
#include "adamw_cpu.h"

void gc_adamw_f32_loop_avx2(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                            gc_adamw_hyper hyper) {
    gc_adamw_f32_loop(param, grad, exp_avg, exp_avg_sq, n, hyper);
}
