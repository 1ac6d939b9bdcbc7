/* Uniform and normal random numbers on the CPU (the arithmetic: ../philox_impl.h).
 * gc_store rounds the double once to the dtype, as the CUDA kernel does. */
#include "../philox_impl.h"
#include "elem_cpu.h"
#include "kernels_cpu.h"

/* dst [n] */
void gc_cpu_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                   uint64_t offset, double a, double b) {
    gc_philox_reader reader = gc_philox_reader_start(seed);
    for (size_t i = 0; i < n; i++)
        gc_store(dst, dtype, i, gc_philox_sample(&reader, kind, offset, i, a, b));
}
