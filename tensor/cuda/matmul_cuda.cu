/* STUB: to be written. */
#include "gradcache/config.h"
#include "gradcache/error.h"
#include "kernels_cuda.h"

extern "C" void gc_cuda_matmul(const gc_matmul_args *args) {
    gc_fatal("gc_cuda_matmul: not implemented");
}
