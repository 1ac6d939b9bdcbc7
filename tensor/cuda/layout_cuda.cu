/* Gather and layout on CUDA: embedding lookup and permutation. Both only move elements,
 * so they work on words of the element's size (2, 4 or 8 bytes) whatever the dtype. */
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

/* table [vocab, dim], ids [n_ids] -> out [n_ids, dim]: one thread per output element, so
 * any row width keeps every thread busy (a gather of single elements, as cross-entropy
 * makes, too). The ids were checked by check_index; a bad one gives a zero row, never a
 * read out of bounds. */
template <typename W>
__global__ void embedding_kernel(const W *table, const int32_t *ids, W *out, int64_t n_ids, int64_t vocab,
                                 int64_t dim) {
    GC_CUDA_GRID_STRIDE(i, n_ids * dim) {
        int64_t row = i / dim, col = i - row * dim;
        int32_t id = ids[row];
        out[i] = id >= 0 && id < vocab ? table[(int64_t)id * dim + col] : W(0);
    }
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

extern "C" void gc_cuda_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab,
                                  size_t dim, gc_dtype dtype) {
    int64_t n = (int64_t)(n_ids * dim);
    with_word("embedding", gc_dtype_size(dtype), [&](auto tag) {
        using W = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(embedding_kernel<W>, gc_cuda_blocks(n), (const W *)table, ids, (W *)out, (int64_t)n_ids,
                       (int64_t)vocab, (int64_t)dim);
    });
}

extern "C" void gc_cuda_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size) {
    permute_plan plan = plan_permute(args);
    with_word("permute", elem_size, [&](auto tag) {
        using W = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(permute_kernel<W>, gc_cuda_blocks(plan.numel), (const W *)x, (W *)y, plan);
    });
}
