/* Host memory for the CPU backend: 64-byte aligned (a cache line, and enough for any
 * vector load), so that kernels may use aligned vector code. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Host memory the operating system could hand out now (available pages), and in all. */
void gc_cpu_memory_info(int device_index, size_t *free_bytes, size_t *total_bytes) {
    (void)device_index;
    long page = sysconf(_SC_PAGESIZE), available = sysconf(_SC_AVPHYS_PAGES), total = sysconf(_SC_PHYS_PAGES);
    *free_bytes = page > 0 && available > 0 ? (size_t)available * (size_t)page : 0;
    *total_bytes = page > 0 && total > 0 ? (size_t)total * (size_t)page : 0;
}

void gc_cpu_memcpy(void *dst, const void *src, size_t nbytes) {
    if (nbytes) memcpy(dst, src, nbytes);
}

void gc_cpu_synchronize(int device_index) { (void)device_index; }
