/* The CUDA backend's kernels, callable from C: gc_cuda_<name> for every kernel of
 * tensor/backend_kernels.h (which says what each computes; the fused ones are composed by
 * the ops instead), with the CPU kernels' semantics. Each runs on the current device (set by
 * gc_backend_for) and the default stream, and checks its launch. The index checks and the
 * workspace have their own headers (index_check_cuda.h, workspace_cuda.h). */
#ifndef GC_TENSOR_KERNELS_CUDA_H
#define GC_TENSOR_KERNELS_CUDA_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GC_CUDA_KERNEL(name, params) void gc_cuda_##name params;
GC_KERNELS(GC_CUDA_KERNEL)
#undef GC_CUDA_KERNEL

/* memory_cuda.c */
void *gc_cuda_raw_alloc(int device_index, size_t nbytes);
void gc_cuda_raw_free(int device_index, void *ptr, size_t nbytes);
void gc_cuda_memory_info(int device_index, size_t *free_bytes, size_t *total_bytes);
void gc_cuda_memcpy_to_host(void *host, const void *src, size_t nbytes);
void gc_cuda_memcpy_from_host(void *dst, const void *host, size_t nbytes);
void gc_cuda_memcpy_same_device(void *dst, const void *src, size_t nbytes);
void gc_cuda_synchronize(int device_index);

#ifdef __cplusplus
}
#endif
#endif
