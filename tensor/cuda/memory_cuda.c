/* Device memory and the device runtime for the CUDA backend. Everything runs on the
 * legacy default stream of the current device, so a block freed by the allocator can be
 * handed to the next op at once: stream order guarantees the old kernels are done with
 * it before a new kernel touches it. */
#include <cuda_runtime.h>

#include "check.h"
#include "kernels_cuda.h"
#include "runtime_cuda.h"

int gc_cuda_device_count(void) {
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
    cudaError_t status = cudaMalloc(&ptr, nbytes);
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

void gc_cuda_memcpy_to_host(void *host, const void *src, size_t nbytes) {
    if (nbytes) GC_CUDA_CHECK(cudaMemcpy(host, src, nbytes, cudaMemcpyDeviceToHost));
}

void gc_cuda_memcpy_from_host(void *dst, const void *host, size_t nbytes) {
    if (nbytes) GC_CUDA_CHECK(cudaMemcpy(dst, host, nbytes, cudaMemcpyHostToDevice));
}

void gc_cuda_memcpy_same_device(void *dst, const void *src, size_t nbytes) {
    if (nbytes) GC_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, 0));
}

void gc_cuda_synchronize(int device_index) {
    gc_cuda_activate(device_index);
    GC_CUDA_CHECK(cudaDeviceSynchronize());
}
