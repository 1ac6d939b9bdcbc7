/* Checked CUDA and cuBLAS calls, and the debugging mode GC_CUDA_SYNC.
 *
 * A failing call is not something a caller can recover from (out of memory is handled
 * before it reaches here, in the allocator), so it stops the program naming the call, the
 * error, and the file and line.
 *
 * A kernel runs after its launch has returned, so a fault inside it (an illegal address, a
 * trap) surfaces at whichever CUDA call comes next, far from its cause. With the
 * environment variable GC_CUDA_SYNC=1, every launch (kernels, cuBLAS, memsets and copies
 * on the stream) is followed by a synchronisation and a check, so that the fault is
 * reported at the launch's own file and line, and the device's pending index checks
 * (backend check_index) are read there too. It is slow: for debugging only. */
#ifndef GC_TENSOR_CUDA_CHECK_H
#define GC_TENSOR_CUDA_CHECK_H

#include <stdbool.h>

#include <cuda_runtime.h>

#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stops the program: "CUDA error <name> (<text>) in <call> at <file>:<line>", with a hint
 * at GC_CUDA_SYNC=1 when the error may come from an earlier kernel. */
__attribute__((noreturn)) void gc_cuda_fail(cudaError_t status, const char *call, const char *file, int line);
/* True when GC_CUDA_SYNC is set to anything but "" or "0" (read once). */
bool gc_cuda_sync_mode(void);
/* After a launch at file:line: checks the launch and, under GC_CUDA_SYNC=1, waits for the
 * device, checks again, and reports the pending index checks. */
void gc_cuda_after_launch(const char *file, int line);

#ifdef __cplusplus
}
#endif

#define GC_CUDA_CHECK(call)                                                                       \
    do {                                                                                          \
        cudaError_t gc_cuda_status_ = (call);                                                     \
        if (gc_cuda_status_ != cudaSuccess) gc_cuda_fail(gc_cuda_status_, #call, __FILE__, __LINE__); \
    } while (0)

/* After anything queued on the stream (a kernel, a cuBLAS call, an asynchronous memset). */
#define GC_CUDA_AFTER_LAUNCH() gc_cuda_after_launch(__FILE__, __LINE__)

/* cublasGetStatusName needs cublas_v2.h, which the files using this macro include. */
#define GC_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                          \
        cublasStatus_t gc_cublas_status_ = (call);                                                \
        if (gc_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
            gc_fatal("cuBLAS error %s (%s) in %s at %s:%d", cublasGetStatusName(gc_cublas_status_), \
                     cublasGetStatusString(gc_cublas_status_), #call, __FILE__, __LINE__);        \
    } while (0)

#endif
