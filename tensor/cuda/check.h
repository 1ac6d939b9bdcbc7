/* Checked CUDA, cuBLAS and NCCL calls. A failing call is not something a caller can
 * recover from (out of memory is handled before it reaches here, in the allocator), so
 * it stops the program naming the call, the error, and the file and line. */
#ifndef GC_TENSOR_CUDA_CHECK_H
#define GC_TENSOR_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "gradcache/error.h"

#define GC_CUDA_CHECK(call)                                                                       \
    do {                                                                                          \
        cudaError_t gc_cuda_status_ = (call);                                                     \
        if (gc_cuda_status_ != cudaSuccess)                                                       \
            gc_fatal("CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(gc_cuda_status_),      \
                     cudaGetErrorString(gc_cuda_status_), #call, __FILE__, __LINE__);             \
    } while (0)

/* After a kernel launch: catches a bad launch configuration at once. */
#define GC_CUDA_CHECK_LAUNCH() GC_CUDA_CHECK(cudaGetLastError())

#define GC_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                          \
        cublasStatus_t gc_cublas_status_ = (call);                                                \
        if (gc_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
            gc_fatal("cuBLAS error %d in %s at %s:%d", (int)gc_cublas_status_, #call, __FILE__,   \
                     __LINE__);                                                                   \
    } while (0)

#endif
