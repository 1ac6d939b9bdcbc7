/* Gather and layout on CUDA: embedding lookup and permutation. Both only move elements,
 * so they work on words of the element's size (2, 4 or 8 bytes) whatever the dtype. */
#include <limits.h>

#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* Calls f(gc_type_tag<W>{}) with an unsigned word W of elem_size bytes. */
template <typename F> void with_word(const char *op, size_t elem_size, F &&f) {
    switch (elem_size) {
    case 2: f(gc_type_tag<uint16_t>{}); return;
    case 4: f(gc_type_tag<uint32_t>{}); return;
    case 8: f(gc_type_tag<uint64_t>{}); return;
    default: gc_fatal("%s: element size %zu is not supported by the CUDA kernel", op, elem_size);
    }
}

/* No bad id seen yet: above every position, so atomicMin keeps the first bad one. */
constexpr unsigned long long no_bad_id = ULLONG_MAX;

/* table [vocab, dim], ids [n_ids] -> out [n_ids, dim]. One block per output row at a
 * time (rows grid-strided over blocks, columns over the block's threads), so each id is
 * read and checked by one block. A bad id's row is zeroed and its position min-ed into
 * *first_bad. */
template <typename W>
__global__ void embedding_kernel(const W *table, const int32_t *ids, W *out, int64_t n_ids, int64_t vocab,
                                 int64_t dim, unsigned long long *first_bad) {
    for (int64_t row = blockIdx.x; row < n_ids; row += gridDim.x) {
        int32_t id = ids[row];
        bool valid = id >= 0 && id < vocab;
        if (!valid && threadIdx.x == 0) atomicMin(first_bad, (unsigned long long)row);
        const W *src = table + (valid ? id : 0) * dim;
        W *dst = out + row * dim;
        for (int64_t col = threadIdx.x; col < dim; col += blockDim.x) dst[col] = valid ? src[col] : W(0);
    }
}

/* The flag of gc_cuda_embedding for the current device: an 8-byte buffer allocated once
 * and kept for the life of the process. It is not a tensor, so it stays out of the
 * allocator's accounting (the live bytes a test or a benchmark predicts), and keeping it
 * saves a cudaMalloc/cudaFree pair, each of which synchronises, per lookup. It is
 * per thread so that two host threads driving one device do not share it. */
unsigned long long *embedding_flag(void) {
    static thread_local unsigned long long *flags[GC_MAX_CUDA_DEVICES];
    int device = 0;
    GC_CUDA_CHECK(cudaGetDevice(&device));
    if (device < 0 || device >= GC_MAX_CUDA_DEVICES)
        gc_fatal("embedding: CUDA device %d outside [0, %d)", device, GC_MAX_CUDA_DEVICES);
    if (!flags[device]) GC_CUDA_CHECK(cudaMalloc((void **)&flags[device], sizeof **flags));
    return flags[device];
}

/* Everything the permutation kernel needs, by value: the output's shape and, for each
 * output dim, the input stride of the input dim it comes from. Padded on the left to
 * GC_BCAST_DIMS dims with size 1. */
struct permute_plan {
    int64_t out_shape[GC_BCAST_DIMS];
    int64_t in_stride[GC_BCAST_DIMS];
    int64_t numel;
};

permute_plan plan_permute(const gc_permute_args *args) {
    int64_t contiguous_stride[GC_BCAST_DIMS];
    int64_t stride = 1;
    for (int d = args->ndim - 1; d >= 0; d--) {
        contiguous_stride[d] = stride;
        stride *= args->in_shape[d];
    }
    permute_plan plan;
    int pad = GC_BCAST_DIMS - args->ndim;
    for (int d = 0; d < GC_BCAST_DIMS; d++) {
        plan.out_shape[d] = d < pad ? 1 : args->in_shape[args->perm[d - pad]];
        plan.in_stride[d] = d < pad ? 0 : contiguous_stride[args->perm[d - pad]];
    }
    plan.numel = stride;
    return plan;
}

/* x [in_shape] -> y [out_shape], contiguous: one thread per output element. */
template <typename W> __global__ void permute_kernel(const W *x, W *y, permute_plan plan) {
    GC_CUDA_GRID_STRIDE(i, plan.numel) {
        int64_t index[GC_BCAST_DIMS];
        gc_cuda_unravel(i, plan.out_shape, index);
        y[i] = x[gc_cuda_offset(index, plan.in_stride)];
    }
}

} // namespace

extern "C" int64_t gc_cuda_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids,
                                     size_t vocab, size_t dim, gc_dtype dtype) {
    if (n_ids == 0) return -1;
    unsigned long long *flag = embedding_flag();
    GC_CUDA_CHECK(cudaMemsetAsync(flag, 0xff, sizeof *flag, 0)); /* every byte 0xff: no_bad_id */
    with_word("embedding", gc_dtype_size(dtype), [&](auto tag) {
        using W = typename decltype(tag)::type;
        gc_cuda_launch(embedding_kernel<W>, gc_cuda_blocks((int64_t)n_ids, 1), (const W *)table, ids, (W *)out,
                       (int64_t)n_ids, (int64_t)vocab, (int64_t)dim, flag);
    });
    /* A synchronising copy (stream order makes it wait for the kernel): once per
     * forward pass, the price of reporting a bad id as the CPU does. */
    unsigned long long first_bad = no_bad_id;
    GC_CUDA_CHECK(cudaMemcpy(&first_bad, flag, sizeof first_bad, cudaMemcpyDeviceToHost));
    return first_bad == no_bad_id ? -1 : (int64_t)first_bad;
}

extern "C" void gc_cuda_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size) {
    permute_plan plan = plan_permute(args);
    with_word("permute", elem_size, [&](auto tag) {
        using W = typename decltype(tag)::type;
        gc_cuda_launch(permute_kernel<W>, gc_cuda_blocks(plan.numel), (const W *)x, (W *)y, plan);
    });
}
