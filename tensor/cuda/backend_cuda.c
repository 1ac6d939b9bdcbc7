/* The CUDA backend's table of kernels. */
#include "index_check_cuda.h"
#include "kernels_cuda.h"
#include "workspace_cuda.h"

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
    .fill = gc_cuda_fill,
    .arange = gc_cuda_arange,
    .random = gc_cuda_random,
    .cast = gc_cuda_cast,
    .unary = gc_cuda_unary,
    .binary = gc_cuda_binary,
    .binary_scalar = gc_cuda_binary_scalar,
    .matmul = gc_cuda_matmul,
    .reduce_last = gc_cuda_reduce_last,
    .softmax_last = gc_cuda_softmax_last,
    .layernorm = gc_cuda_layernorm,
    .check_index = gc_cuda_check_index,
    .embedding = gc_cuda_embedding,
    .permute = gc_cuda_permute,
    .scatter_last = gc_cuda_scatter_last,
    .embedding_backward = gc_cuda_embedding_backward,
    .dropout = gc_cuda_dropout,
    .score_tile_lse = gc_cuda_score_tile_lse,
    .score_tile_grad = gc_cuda_score_tile_grad,
    .sgd_update = gc_cuda_sgd_update,
    .adamw_update = gc_cuda_adamw_update,
    .nonfinite_check = gc_cuda_nonfinite_check,
};
