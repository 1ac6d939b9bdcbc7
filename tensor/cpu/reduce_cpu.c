/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_reduce_last(gc_reduce_op op, const void *x, void *out, int32_t *argmax, size_t rows,
                        size_t cols, gc_dtype dtype) {
    gc_fatal("gc_cpu_reduce_last: not implemented");
}
void gc_cpu_softmax_last(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype, bool log) {
    gc_fatal("gc_cpu_softmax_last: not implemented");
}
