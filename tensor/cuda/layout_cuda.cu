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

/* A permutation that keeps the last dim (attention's heads split and merged: [B, T, H, Dh] <->
 * [B, H, T, Dh]) moves whole rows of `inner` elements: each output row is one contiguous
 * input row. Its kernel moves them in vectors of up to 16 bytes (as many as the row's bytes
 * divide into) and indexes in 32 bits where every offset fits: the element-wise kernel's
 * 64-bit divisions, four per element, held it to a quarter of the copy bandwidth on an H200
 * (bench/RESULTS.md). Rows are counted over the 3 leading output dims (padded with 1). */
struct permute_rows_plan {
    int64_t out_rows[3];   /* the leading output dims */
    int64_t row_stride[3]; /* the input stride, in vectors, of the input dim each comes from */
    int64_t row_vectors;   /* vectors per row */
    int64_t vectors;       /* in the whole tensor */
};

template <typename V, typename I> __global__ void permute_rows_kernel(const V *x, V *y, permute_rows_plan plan) {
    const I row_vectors = (I)plan.row_vectors, rows1 = (I)plan.out_rows[1], rows2 = (I)plan.out_rows[2];
    const I stride0 = (I)plan.row_stride[0], stride1 = (I)plan.row_stride[1], stride2 = (I)plan.row_stride[2];
    GC_CUDA_GRID_STRIDE(i, plan.vectors) {
        I vector = (I)i, row = vector / row_vectors, column = vector - row * row_vectors;
        I i2 = row % rows2, rest = row / rows2, i1 = rest % rows1, i0 = rest / rows1;
        y[vector] = x[i0 * stride0 + i1 * stride1 + i2 * stride2 + column];
    }
}

/* The row plan of a permutation in vectors of V (the leading output dims and their input
 * strides, each a multiple of the kept last dim, so of a row's vectors). */
template <typename V> permute_rows_plan plan_rows(const permute_plan &plan, size_t elem_size) {
    int64_t per_vector = (int64_t)(sizeof(V) / elem_size), inner = plan.out_shape[GC_BCAST_DIMS - 1];
    permute_rows_plan rows;
    for (int d = 0; d < 3; d++) {
        rows.out_rows[d] = plan.out_shape[d + GC_BCAST_DIMS - 4];
        rows.row_stride[d] = plan.in_stride[d + GC_BCAST_DIMS - 4] / per_vector;
    }
    rows.row_vectors = inner / per_vector;
    rows.vectors = plan.numel / per_vector;
    return rows;
}

template <typename V> void launch_permute_rows(const void *x, void *y, const permute_plan &plan, size_t elem_size) {
    permute_rows_plan rows = plan_rows<V>(plan, elem_size);
    /* 32-bit indices when the largest offset, read or written, fits in them */
    int64_t largest = rows.vectors;
    for (int d = 0; d < 3; d++) largest += (rows.out_rows[d] - 1) * rows.row_stride[d];
    if (largest <= (int64_t)UINT32_MAX)
        GC_CUDA_LAUNCH((permute_rows_kernel<V, uint32_t>), gc_cuda_blocks(rows.vectors), (const V *)x, (V *)y, rows);
    else GC_CUDA_LAUNCH((permute_rows_kernel<V, uint64_t>), gc_cuda_blocks(rows.vectors), (const V *)x, (V *)y, rows);
}

/* Whether the rows of a permutation that keeps the last dim can move in vectors of V: the
 * row's bytes divide into them, and x and y (a view may start anywhere) are aligned to them. */
template <typename V> bool rows_move_in(const void *x, const void *y, const permute_plan &plan, size_t elem_size) {
    bool aligned = ((uintptr_t)x | (uintptr_t)y) % sizeof(V) == 0;
    return aligned && sizeof(V) >= elem_size &&
           plan.out_shape[GC_BCAST_DIMS - 1] * (int64_t)elem_size % (int64_t)sizeof(V) == 0;
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
    if (plan.numel == 0) return;
    if (args->ndim >= 1 && args->perm[args->ndim - 1] == args->ndim - 1) {
        if (rows_move_in<uint4>(x, y, plan, elem_size)) return launch_permute_rows<uint4>(x, y, plan, elem_size);
        if (rows_move_in<uint2>(x, y, plan, elem_size)) return launch_permute_rows<uint2>(x, y, plan, elem_size);
        if (rows_move_in<uint32_t>(x, y, plan, elem_size)) return launch_permute_rows<uint32_t>(x, y, plan, elem_size);
        if (rows_move_in<uint16_t>(x, y, plan, elem_size)) return launch_permute_rows<uint16_t>(x, y, plan, elem_size);
    }
    with_word("permute", elem_size, [&](auto tag) {
        using W = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(permute_kernel<W>, gc_cuda_blocks(plan.numel), (const W *)x, (W *)y, plan);
    });
}
