/* Fill, arange and dtype conversion on the CPU. */
#include "elem_cpu.h"
#include "kernels_cpu.h"

void gc_cpu_fill(void *dst, size_t n, gc_dtype dtype, double value) {
    for (size_t i = 0; i < n; i++) gc_store(dst, dtype, i, value);
}

void gc_cpu_arange(void *dst, size_t n, gc_dtype dtype, double start, double step) {
    for (size_t i = 0; i < n; i++) gc_store(dst, dtype, i, start + (double)i * step);
}

/* Through double, which holds every value of every dtype exactly; so the only rounding
 * is the one into the destination type (f32 -> f16 rounds once: double -> f32 is exact
 * for a value that came from f32). Float to i32 truncates toward zero, as in C. */
void gc_cpu_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n) {
    for (size_t i = 0; i < n; i++) gc_store(dst, dst_dtype, i, gc_load(src, src_dtype, i));
}
