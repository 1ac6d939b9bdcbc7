/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                    uint64_t offset) {
    (void)x; (void)y; (void)n; (void)dtype; (void)threshold; (void)scale; (void)seed; (void)offset;
    gc_fatal("dropout: not implemented");
}
