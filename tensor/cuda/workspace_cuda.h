/* The device memory the CUDA backend keeps for itself, per device: one block the allocator
 * reserves at the device's first allocation and counts as workspace (tensor/alloc.c), so
 * that no kernel allocates and every byte the library holds shows in the statistics. */
#ifndef GC_TENSOR_WORKSPACE_CUDA_H
#define GC_TENSOR_WORKSPACE_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch of the reductions split over several blocks (reduce_cuda.cu): 256 KiB, the room of
 * sum_middle's 32768 partial sums of up to 8 bytes (GC_MIDDLE_MAX_PARTIALS: 1024 blocks of
 * 32 columns, what fills a GPU when a bias gradient has few columns); a split row
 * reduction's 1024 partial results of up to 16 bytes (a value and its index) take 16 KiB of
 * it. Beside cuBLAS's 32 MiB it is small. */
#define GC_CUDA_REDUCE_SCRATCH_BYTES (32768 * 8)

typedef struct gc_cuda_workspace {
    void *cublas;                    /* cuBLAS's workspace [cublas_bytes] (cublasSetWorkspace) */
    size_t cublas_bytes;
    unsigned long long *index_slots; /* [GC_INDEX_SLOTS] (index_check_cuda.cu) */
    void *reduce_scratch;            /* [GC_CUDA_REDUCE_SCRATCH_BYTES] */
} gc_cuda_workspace;

/* backend workspace_bytes and adopt_workspace (see backend.h). */
size_t gc_cuda_workspace_bytes(int device_index);
void gc_cuda_adopt_workspace(int device_index, void *ptr, size_t nbytes);
/* The workspace of a device that has one (any device holding a tensor has). */
const gc_cuda_workspace *gc_cuda_workspace_of(int device_index);
/* The calling thread's current device (checked against GC_MAX_CUDA_DEVICES). */
int gc_cuda_current_device(void);

#ifdef __cplusplus
}
#endif
#endif
