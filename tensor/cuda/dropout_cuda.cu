/* Dropout on CUDA: the CPU's mask and values (tensor/cpu/dropout_cpu.c) bit for bit. The
 * mask comes from the same Philox words (../philox_impl.h), and a kept element is one
 * multiply in gc_elem<T>::acc rounded once into T, as on the CPU. dropout_rows draws each
 * row's words where its position puts them. */
#include "../philox_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* Group g of elements [0, n) whose words start at `offset` (x, y at the elements' start):
 * the elements of one Philox block (../launch_impl.h). */
template <typename T>
__device__ void drop_group(const T *x, T *y, int64_t n, int64_t g, uint32_t threshold, typename gc_elem<T>::acc scale,
                           uint64_t seed, uint64_t offset) {
    using acc = typename gc_elem<T>::acc;
    gc_philox_reader reader = gc_philox_reader_start(seed);
    int64_t begin, end;
    gc_dropout_group(g, n, offset, &begin, &end);
    for (int64_t i = begin; i < end; i++) {
        bool keep = (gc_philox_read(&reader, offset + (uint64_t)i) >> 8) >= threshold;
        y[i] = gc_elem<T>::from_acc(keep ? gc_elem<T>::to_acc(x[i]) * scale : (acc)0);
    }
}

/* x, y [n] */
template <typename T>
__global__ void dropout_kernel(const T *x, T *y, int64_t n, uint32_t threshold, double scale, uint64_t seed,
                               uint64_t offset) {
    using acc = typename gc_elem<T>::acc;
    const acc scale_acc = (acc)scale; /* the CPU's (float)scale for the 32- and 16-bit types */
    /* a thread per group of elements whose words share a Philox block */
    GC_CUDA_GRID_STRIDE(g, gc_dropout_group_count(n, offset)) drop_group(x, y, n, g, threshold, scale_acc, seed, offset);
}

/* Groups one row of `cols` can span, whatever its words' alignment in a Philox block. */
__host__ __device__ int64_t row_group_bound(int64_t cols) { return cols / 4 + 2; }

/* x, y [rows, cols], positions [rows]: a thread per (row, group), the row's words starting at
 * offset + positions[r] cols; the bound's spare groups of a row have nothing to do. */
template <typename T>
__global__ void dropout_rows_kernel(const T *x, T *y, int64_t rows, int64_t cols, const int32_t *positions,
                                    uint32_t threshold, double scale, uint64_t seed, uint64_t offset) {
    using acc = typename gc_elem<T>::acc;
    const acc scale_acc = (acc)scale;
    const int64_t per_row = row_group_bound(cols);
    GC_CUDA_GRID_STRIDE(t, rows * per_row) {
        int64_t r = t / per_row, g = t % per_row;
        uint64_t row_offset = offset + (uint64_t)(int64_t)positions[r] * (uint64_t)cols;
        if (g < gc_dropout_group_count(cols, row_offset))
            drop_group(x + r * cols, y + r * cols, cols, g, threshold, scale_acc, seed, row_offset);
    }
}

} // namespace

/* x, y [n] */
extern "C" void gc_cuda_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale,
                                uint64_t seed, uint64_t offset) {
    gc_cuda_dispatch_float("dropout", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(dropout_kernel<T>, gc_cuda_blocks(gc_dropout_group_count((int64_t)n, offset)), (const T *)x,
                       (T *)y, (int64_t)n, threshold, scale, seed, offset);
    });
}

/* x, y [rows, cols], positions [rows] */
extern "C" void gc_cuda_dropout_rows(const void *x, void *y, size_t rows, size_t cols, const int32_t *positions,
                                     gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                                     uint64_t offset) {
    if (rows == 0 || cols == 0) return;
    gc_cuda_dispatch_float("dropout_rows", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(dropout_rows_kernel<T>, gc_cuda_blocks((int64_t)rows * row_group_bound((int64_t)cols)),
                       (const T *)x, (T *)y, (int64_t)rows, (int64_t)cols, positions, threshold, scale, seed, offset);
    });
}
