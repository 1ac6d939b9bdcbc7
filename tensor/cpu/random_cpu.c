/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                   uint64_t offset, double a, double b) {
    gc_fatal("gc_cpu_random: not implemented");
}
