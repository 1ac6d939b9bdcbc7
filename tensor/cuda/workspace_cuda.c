/* The CUDA backend's workspace (see workspace_cuda.h): one block per device, carved into
 * the cuBLAS workspace, the index-check slots and the reduction scratch, each part starting
 * on a 256-byte boundary (cuBLAS asks for that much alignment; cudaMalloc gives it). */
#include <stdint.h>

#include "check.h"
#include "gradcache/device.h"
#include "index_check_cuda.h"
#include "workspace_cuda.h"

static gc_cuda_workspace workspaces[GC_MAX_CUDA_DEVICES];

static size_t align256(size_t nbytes) { return (nbytes + 255) / 256 * 256; }

/* cuBLAS's recommended workspace: 32 MiB on Hopper (compute capability 9) and later, 4 MiB
 * before (cuBLAS documentation, cublasSetWorkspace). Without one of its own it would
 * cudaMalloc a workspace the statistics could not see. */
static size_t cublas_workspace_bytes(int device_index) {
    int major = 0;
    GC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));
    return (size_t)(major >= 9 ? 32 : 4) << 20;
}

size_t gc_cuda_workspace_bytes(int device_index) {
    return align256(cublas_workspace_bytes(device_index)) +
           align256(GC_INDEX_SLOTS * sizeof(unsigned long long)) + align256(GC_CUDA_REDUCE_SCRATCH_BYTES);
}

void gc_cuda_adopt_workspace(int device_index, void *ptr, size_t nbytes) {
    if (nbytes != gc_cuda_workspace_bytes(device_index))
        gc_fatal("cuda workspace: %zu bytes given for cuda:%d, %zu expected", nbytes, device_index,
                 gc_cuda_workspace_bytes(device_index));
    char *next = ptr;
    gc_cuda_workspace *workspace = &workspaces[device_index];
    workspace->cublas_bytes = cublas_workspace_bytes(device_index);
    workspace->cublas = next;
    next += align256(workspace->cublas_bytes);
    workspace->index_slots = (unsigned long long *)(void *)next;
    next += align256(GC_INDEX_SLOTS * sizeof(unsigned long long));
    workspace->reduce_scratch = next;
    gc_cuda_index_checks_adopt(device_index, workspace->index_slots);
}

const gc_cuda_workspace *gc_cuda_workspace_of(int device_index) {
    const gc_cuda_workspace *workspace = &workspaces[device_index];
    if (!workspace->cublas)
        gc_fatal("cuda workspace: cuda:%d has none yet (no tensor was allocated there)", device_index);
    return workspace;
}

int gc_cuda_current_device(void) {
    int device = 0;
    GC_CUDA_CHECK(cudaGetDevice(&device));
    if (device < 0 || device >= GC_MAX_CUDA_DEVICES)
        gc_fatal("cuda: device %d outside [0, %d)", device, GC_MAX_CUDA_DEVICES);
    return device;
}
