/* Host memory for the CPU backend: 64-byte aligned (a cache line, and enough for any
 * vector load), so that kernels may use aligned vector code. */
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"

void *gc_cpu_raw_alloc(int device_index, size_t nbytes) {
    (void)device_index;
    size_t rounded = (nbytes + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
    return aligned_alloc(64, rounded ? rounded : 64);
}

void gc_cpu_raw_free(int device_index, void *ptr, size_t nbytes) {
    (void)device_index;
    (void)nbytes;
    free(ptr);
}

void gc_cpu_memcpy(void *dst, const void *src, size_t nbytes) {
    if (nbytes) memcpy(dst, src, nbytes);
}

void gc_cpu_synchronize(int device_index) { (void)device_index; }
