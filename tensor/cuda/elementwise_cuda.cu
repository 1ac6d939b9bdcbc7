/* STUB: to be written. */
#include "gradcache/config.h"
#include "gradcache/error.h"
#include "kernels_cuda.h"

extern "C" void gc_cuda_unary(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype) {
    gc_fatal("gc_cuda_unary: not implemented");
}
extern "C" void gc_cuda_binary(gc_binary_op op, const void *a, const void *b, void *out,
                    const gc_broadcast *bc, gc_dtype dtype) {
    gc_fatal("gc_cuda_binary: not implemented");
}
extern "C" void gc_cuda_binary_scalar(gc_binary_op op, const void *a, double s, bool scalar_first, void *out,
                           size_t n, gc_dtype dtype) {
    gc_fatal("gc_cuda_binary_scalar: not implemented");
}
