/* Scatters for backward rules, on CUDA. */
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* src [rows], index [rows] -> out [rows, cols] (zero-filled): one thread per row. An index
 * outside [0, cols) writes nothing: never out of bounds, whatever reaches the kernel. */
template <typename T>
__global__ void scatter_last_kernel(const T *src, const int32_t *index, T *out, int64_t rows, int64_t cols) {
    GC_CUDA_GRID_STRIDE(r, rows) {
        int32_t column = index[r];
        if (column >= 0 && column < cols) out[r * cols + column] = src[r];
    }
}

/* grad_out [n_ids, dim] added into grad_table [vocab, dim] rows ids[i], the table in T's
 * working type (float for f16 and bf16, whose own atomic additions would round at each one):
 * one thread per element. Two ids may be equal, so the additions are atomic (their order, and
 * so the last bits of a sum of duplicates, may vary from run to run). An id outside
 * [0, vocab) adds nothing: its forward's check_index reports it at the next synchronisation,
 * which may come after this kernel was queued. */
template <typename T>
__global__ void embedding_backward_kernel(const T *grad_out, const int32_t *ids, typename gc_elem<T>::acc *grad_table,
                                          int64_t n_ids, int64_t vocab, int64_t dim) {
    GC_CUDA_GRID_STRIDE(i, n_ids * dim) {
        int64_t row = i / dim, col = i % dim;
        int32_t id = ids[row];
        if (id >= 0 && id < vocab) atomicAdd(&grad_table[(int64_t)id * dim + col], gc_elem<T>::to_acc(grad_out[i]));
    }
}

} // namespace

extern "C" void gc_cuda_scatter_last(const void *src, const int32_t *index, void *out, size_t rows, size_t cols,
                                     gc_dtype dtype) {
    gc_cuda_dispatch_float("scatter_last", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(scatter_last_kernel<T>, gc_cuda_blocks((int64_t)rows), (const T *)src, index, (T *)out,
                       (int64_t)rows, (int64_t)cols);
    });
}

extern "C" void gc_cuda_embedding_backward(const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids,
                                           size_t vocab, size_t dim, gc_dtype dtype) {
    gc_cuda_dispatch_float("embedding_backward", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = typename gc_elem<T>::acc;
        GC_CUDA_LAUNCH(embedding_backward_kernel<T>, gc_cuda_blocks((int64_t)(n_ids * dim)), (const T *)grad_out, ids,
                       (A *)grad_table, (int64_t)n_ids, (int64_t)vocab, (int64_t)dim);
    });
}
