/* Dropout on the CPU: the mask from Philox (../philox_impl.h), so that CUDA draws the same.
 * A kept element is x * scale computed in the working type (float for f32, f16 and bf16,
 * as gc_mul_scalar does; double for f64) and rounded once into the dtype. */
#include <stdbool.h>

#include "../philox_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"

/* x, y [n] */
void gc_cpu_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                    uint64_t offset) {
    const float scale_f32 = (float)scale;
    gc_philox_reader reader = gc_philox_reader_start(seed);
    for (size_t i = 0; i < n; i++) {
        bool keep = (gc_philox_read(&reader, offset + i) >> 8) >= threshold;
        double value = gc_load(x, dtype, i);
        double kept = dtype == GC_F64 ? value * scale : (double)((float)value * scale_f32);
        gc_store(y, dtype, i, keep ? kept : 0.0);
    }
}
