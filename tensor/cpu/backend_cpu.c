/* The CPU backend's table of kernels. */
#include "kernels_cpu.h"

const gc_backend gc_cpu_backend = {
    .name = "cpu",
    .raw_alloc = gc_cpu_raw_alloc,
    .raw_free = gc_cpu_raw_free,
    .memcpy_to_host = gc_cpu_memcpy,
    .memcpy_from_host = gc_cpu_memcpy,
    .memcpy_same_device = gc_cpu_memcpy,
    .synchronize = gc_cpu_synchronize,
    .fill = gc_cpu_fill,
    .arange = gc_cpu_arange,
    .random = gc_cpu_random,
    .cast = gc_cpu_cast,
    .unary = gc_cpu_unary,
    .binary = gc_cpu_binary,
    .binary_scalar = gc_cpu_binary_scalar,
    .matmul = gc_cpu_matmul,
    .reduce_last = gc_cpu_reduce_last,
    .softmax_last = gc_cpu_softmax_last,
    .layernorm = gc_cpu_layernorm,
    .embedding = gc_cpu_embedding,
    .permute = gc_cpu_permute,
    .scatter_last = gc_cpu_scatter_last,
    .embedding_backward = gc_cpu_embedding_backward,
};
