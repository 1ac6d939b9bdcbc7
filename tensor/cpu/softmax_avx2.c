/* The f32 softmax row and columns of softmax_cpu.h built with AVX2 (this file is compiled with -mavx2
 * and -ffp-contract=off, and called only after a run-time check: see cpu_isa.c): eight
 * floats per instruction where the baseline build has four, the same bits. */
#include "softmax_cpu.h"

void gc_softmax_scaled_row_f32_avx2(const float *x, const float *bias, float scale, bool staged, float *y,
                                    size_t cols) {
    gc_softmax_scaled_row_f32(x, bias, scale, staged, y, cols);
}

void gc_softmax_scaled_columns_f32_avx2(const float *x, const float *bias, float scale, bool staged, float *y,
                                        size_t places, size_t stride, size_t queries) {
    gc_softmax_scaled_columns_f32(x, bias, scale, staged, y, places, stride, queries);
}
