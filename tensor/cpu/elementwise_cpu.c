/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_unary(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype) {
    gc_fatal("gc_cpu_unary: not implemented");
}
void gc_cpu_binary(gc_binary_op op, const void *a, const void *b, void *out,
                   const gc_broadcast *bc, gc_dtype dtype) {
    gc_fatal("gc_cpu_binary: not implemented");
}
void gc_cpu_binary_scalar(gc_binary_op op, const void *a, double s, bool scalar_first, void *out,
                          size_t n, gc_dtype dtype) {
    gc_fatal("gc_cpu_binary_scalar: not implemented");
}
