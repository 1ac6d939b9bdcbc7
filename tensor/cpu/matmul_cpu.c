/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

void gc_cpu_matmul(const gc_matmul_args *args) {
    gc_fatal("gc_cpu_matmul: not implemented");
}
