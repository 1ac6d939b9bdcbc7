/* Device memory and the device runtime for the CUDA backend. Everything runs on the
 * legacy default stream of the current device, so a block freed by the allocator can be
 * handed to the next op at once: stream order guarantees the old kernels are done with
 * it before a new kernel touches it.
 *
 * The two places where the host waits for the device, a copy to the host and a
 * synchronisation, also read the device's pending index checks (index_check_cuda.h): the
 * device is idle there, so reading them adds no wait. */
#include <cuda_runtime.h>

#include "check.h"
#include "index_check_cuda.h"
#include "kernels_cuda.h"
#include "runtime_cuda.h"

/* The note of an index error found where the host waited. */
static const char *const found_at_wait =
    "found at the device's next synchronisation; GC_CUDA_SYNC=1 reports it at its launch";

int gc_cuda_probe_device_count(void) {
    static int count = -1; /* probed once: a process's devices do not change */
    if (count < 0) {
        int found = 0;
        if (cudaGetDeviceCount(&found) != cudaSuccess) {
            found = 0;           /* no driver or no GPU: a CPU-only run, not an error */
            cudaGetLastError();  /* clear the sticky error the probe left */
        }
        count = found;
    }
    return count;
}

void gc_cuda_activate(int index) {
    int current = -1;
    GC_CUDA_CHECK(cudaGetDevice(&current));
    if (current != index) GC_CUDA_CHECK(cudaSetDevice(index));
}

void gc_cuda_capability(int index, int *major, int *minor) {
    GC_CUDA_CHECK(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, index));
    GC_CUDA_CHECK(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, index));
}

void *gc_cuda_raw_alloc(int device_index, size_t nbytes) {
    gc_cuda_activate(device_index);
    void *ptr = NULL;
    /* cudaMalloc of 0 bytes succeeds with NULL; a zero-byte tensor needs a unique pointer. */
    cudaError_t status = cudaMalloc(&ptr, nbytes ? nbytes : 1);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* out of memory is recoverable: clear it and report NULL */
        return NULL;
    }
    GC_CUDA_CHECK(status);
    return ptr;
}

void gc_cuda_raw_free(int device_index, void *ptr, size_t nbytes) {
    (void)nbytes;
    gc_cuda_activate(device_index);
    GC_CUDA_CHECK(cudaFree(ptr));
}

void gc_cuda_memory_info(int device_index, size_t *free_bytes, size_t *total_bytes) {
    gc_cuda_activate(device_index);
    GC_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

/* Synchronous: stream order makes it wait for the kernels that write src. */
void gc_cuda_memcpy_to_host(void *host, const void *src, size_t nbytes) {
    if (nbytes) GC_CUDA_CHECK(cudaMemcpy(host, src, nbytes, cudaMemcpyDeviceToHost));
    gc_cuda_report_index_checks(found_at_wait);
}

/* Asynchronous: pageable host memory is staged before the call returns, so `host` may be
 * reused at once, and the host need not wait for queued kernels as cudaMemcpy would. */
void gc_cuda_memcpy_from_host(void *dst, const void *host, size_t nbytes) {
    if (!nbytes) return;
    GC_CUDA_CHECK(cudaMemcpyAsync(dst, host, nbytes, cudaMemcpyHostToDevice, 0));
    GC_CUDA_AFTER_LAUNCH();
}

void gc_cuda_memcpy_same_device(void *dst, const void *src, size_t nbytes) {
    if (!nbytes) return;
    GC_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, 0));
    GC_CUDA_AFTER_LAUNCH();
}

void gc_cuda_synchronize(int device_index) {
    gc_cuda_activate(device_index);
    GC_CUDA_CHECK(cudaDeviceSynchronize());
    gc_cuda_report_index_checks(found_at_wait);
}
