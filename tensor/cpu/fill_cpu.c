/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_fill(void *dst, size_t n, gc_dtype dtype, double value) {
    gc_fatal("gc_cpu_fill: not implemented");
}
void gc_cpu_arange(void *dst, size_t n, gc_dtype dtype, double start, double step) {
    gc_fatal("gc_cpu_arange: not implemented");
}
void gc_cpu_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n) {
    gc_fatal("gc_cpu_cast: not implemented");
}
