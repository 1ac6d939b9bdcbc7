/* STUB: to be written. */
#include "gradcache/config.h"
#include "gradcache/error.h"
#include "kernels_cuda.h"

extern "C" void gc_cuda_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                    uint64_t offset, double a, double b) {
    gc_fatal("gc_cuda_random: not implemented");
}
