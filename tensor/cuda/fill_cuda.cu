/* STUB: to be written. */
#include "gradcache/config.h"
#include "gradcache/error.h"
#include "kernels_cuda.h"

extern "C" void gc_cuda_fill(void *dst, size_t n, gc_dtype dtype, double value) {
    gc_fatal("gc_cuda_fill: not implemented");
}
extern "C" void gc_cuda_arange(void *dst, size_t n, gc_dtype dtype, double start, double step) {
    gc_fatal("gc_cuda_arange: not implemented");
}
extern "C" void gc_cuda_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n) {
    gc_fatal("gc_cuda_cast: not implemented");
}
