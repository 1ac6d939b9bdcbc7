/* The CUDA backend's table of kernels: every kernel of tensor/backend_kernels.h but the
 * fused ones, which the ops compose. */
#include "kernels_cuda.h"
#include "workspace_cuda.h"

#define GC_CUDA_ENTRY(name, params) .name = gc_cuda_##name,

const gc_backend gc_cuda_backend = {
    .name = "cuda",
    .raw_alloc = gc_cuda_raw_alloc,
    .raw_free = gc_cuda_raw_free,
    .workspace_bytes = gc_cuda_workspace_bytes,
    .adopt_workspace = gc_cuda_adopt_workspace,
    .memory_info = gc_cuda_memory_info,
    .memcpy_to_host = gc_cuda_memcpy_to_host,
    .memcpy_from_host = gc_cuda_memcpy_from_host,
    .memcpy_same_device = gc_cuda_memcpy_same_device,
    .synchronize = gc_cuda_synchronize,
    GC_KERNELS(GC_CUDA_ENTRY)
};
