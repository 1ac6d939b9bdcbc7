/* The tiled contrastive loss's tile kernels on CUDA: the semantics of
 * tensor/cpu/score_tile_cpu.c, the per-element arithmetic of ../score_tile_impl.h.
 *
 *  - rows: one block per row (reduce_common.cuh): the scores in place, the row's max, then
 *    the sum of exp(s - max), both block reductions; thread 0 merges the pair;
 *  - columns: blocks of 32 columns x COLUMN_LANES rows. A warp reads 32 neighbouring columns
 *    of one row (coalesced); each thread folds every COLUMN_LANES-th row of its column, and
 *    the lanes of a column are combined through shared memory;
 *  - gradient: one thread per element.
 * Everything is computed in the tile's dtype (f32 or f64), as the CPU does except that the
 * CPU sums in double. */
#include "../score_tile_impl.h"
#include "kernels_cuda.h"
#include "reduce_common.cuh"

namespace {

#define COLUMN_WIDTH 32 /* columns per block: one warp */
#define COLUMN_LANES 8  /* threads per column */

/* The shared formulas, picked by the working type (float or double). */
#define SCORE_TILE_OVERLOADS(T)                                                                          \
    __device__ inline T tile_score(T dot, T row_scale, T col_scale) {                                   \
        return gc_tile_score_##T(dot, row_scale, col_scale);                                             \
    }                                                                                                    \
    __device__ inline T tile_nan_max(T a, T b) { return gc_tile_nan_max_##T(a, b); }                    \
    __device__ inline void lse_merge(T *max, T *sum, T other_max, T other_sum) {                        \
        gc_lse_merge_##T(max, sum, other_max, other_sum);                                                \
    }                                                                                                    \
    __device__ inline T tile_dot_grad(T s, T row_lse, T row_weight, bool symmetric, T col_lse, T col_weight, \
                                      bool is_target, T target_weight, T row_scale, T col_scale) {       \
        return gc_tile_dot_grad_##T(s, row_lse, row_weight, symmetric, col_lse, col_weight, is_target,   \
                                    target_weight, row_scale, col_scale);                                \
    }
SCORE_TILE_OVERLOADS(float)
SCORE_TILE_OVERLOADS(double)

struct nan_max_op {
    template <typename A> __device__ A operator()(A a, A b) const { return tile_nan_max(a, b); }
};

/* Calls launch(gc_type_tag<T>{}) for the tile's dtype (f32 or f64: the loss works in f32
 * for f16 and bf16 inputs). */
template <typename F> void dispatch_tile(const char *op, gc_dtype dtype, F &&launch) {
    if (dtype == GC_F32) launch(gc_type_tag<float>{});
    else if (dtype == GC_F64) launch(gc_type_tag<double>{});
    else gc_fatal("%s: dtype %s is not supported (f32 or f64)", op, gc_dtype_name(dtype));
}

template <typename T>
__global__ void __launch_bounds__(GC_ROW_MAX_THREADS) rows_lse_kernel(gc_score_tile_args a) {
    T *scores = (T *)a.scores, *row_max = (T *)a.row_max, *row_sum = (T *)a.row_sum;
    const T *row_scale = (const T *)a.row_scale, *col_scale = (const T *)a.col_scale, *bias = (const T *)a.bias;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        T *s = scores + row * a.cols;
        for (int64_t j = threadIdx.x; j < a.cols; j += blockDim.x)
            s[j] = tile_score(s[j], row_scale[row], col_scale[j]) + (bias ? bias[row * a.cols + j] : (T)0);
        /* Each thread reads back the elements it wrote itself: no barrier needed before. */
        T max = gc_row_reduce((size_t)a.cols, (T)-INFINITY, [&](size_t j) { return s[j]; }, nan_max_op());
        /* max is the same in every thread, so every thread takes the same branch. */
        T sum = max == -INFINITY ? (T)0
                                 : gc_row_reduce((size_t)a.cols, (T)0, [&](size_t j) { return exp(s[j] - max); },
                                                 gc_plus());
        if (threadIdx.x == 0) {
            lse_merge(&row_max[row], &row_sum[row], max, sum);
            int64_t target = a.targets[row] - a.col_start;
            if (target >= 0 && target < a.cols) ((T *)a.target_score)[row] = s[target];
        }
    }
}

/* Combines the COLUMN_LANES values of each column of the block; returns the result to
 * every thread of the column. Every thread of the block must call it. */
template <typename T, typename Op> __device__ T column_reduce(T value, Op op) {
    __shared__ T partial[COLUMN_LANES][COLUMN_WIDTH];
    partial[threadIdx.y][threadIdx.x] = value;
    __syncthreads();
    T total = partial[0][threadIdx.x];
    for (unsigned lane = 1; lane < COLUMN_LANES; lane++) total = op(total, partial[lane][threadIdx.x]);
    __syncthreads(); /* everyone has read partial before the next call writes it */
    return total;
}

/* After rows_lse_kernel: the scores hold s. */
template <typename T> __global__ void columns_lse_kernel(gc_score_tile_args a) {
    const T *scores = (const T *)a.scores;
    int64_t col = (int64_t)blockIdx.x * COLUMN_WIDTH + threadIdx.x;
    bool active = col < a.cols;
    T max = -INFINITY, sum = 0;
    for (int64_t i = threadIdx.y; active && i < a.rows; i += COLUMN_LANES)
        max = tile_nan_max(max, scores[i * a.cols + col]);
    max = column_reduce(max, nan_max_op());
    for (int64_t i = threadIdx.y; active && max != -INFINITY && i < a.rows; i += COLUMN_LANES)
        sum += exp(scores[i * a.cols + col] - max);
    sum = column_reduce(sum, gc_plus());
    if (active && threadIdx.y == 0) lse_merge(&((T *)a.col_max)[col], &((T *)a.col_sum)[col], max, sum);
}

template <typename T> __global__ void grad_kernel(gc_score_tile_args a) {
    T *scores = (T *)a.scores;
    const T *row_scale = (const T *)a.row_scale, *col_scale = (const T *)a.col_scale, *row_lse = (const T *)a.row_lse;
    const T *col_lse = (const T *)a.col_lse, *col_weight = (const T *)a.col_weight, *bias = (const T *)a.bias;
    bool symmetric = col_lse != nullptr;
    GC_CUDA_GRID_STRIDE(k, a.rows * a.cols) {
        int64_t i = k / a.cols, j = k % a.cols;
        T s = tile_score(scores[k], row_scale[i], col_scale[j]) + (bias ? bias[k] : (T)0);
        scores[k] = tile_dot_grad(s, row_lse[i], (T)a.row_weight, symmetric, symmetric ? col_lse[j] : (T)0,
                                  symmetric ? col_weight[j] : (T)0, a.targets[i] - a.col_start == j,
                                  (T)a.target_weight, row_scale[i], col_scale[j]);
    }
}

} // namespace

extern "C" void gc_cuda_score_tile_lse(const gc_score_tile_args *args) {
    if (args->rows == 0 || args->cols == 0) return;
    dispatch_tile("score_tile_lse", args->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_ROW_LAUNCH(rows_lse_kernel<T>, (size_t)args->rows, (size_t)args->cols, *args);
        if (args->col_max) {
            unsigned blocks = (unsigned)((args->cols + COLUMN_WIDTH - 1) / COLUMN_WIDTH);
            columns_lse_kernel<T><<<blocks, dim3(COLUMN_WIDTH, COLUMN_LANES)>>>(*args);
            GC_CUDA_AFTER_LAUNCH();
        }
    });
}

extern "C" void gc_cuda_score_tile_grad(const gc_score_tile_args *args) {
    if (args->rows == 0 || args->cols == 0) return;
    dispatch_tile("score_tile_grad", args->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH(grad_kernel<T>, gc_cuda_blocks(args->rows * args->cols), *args);
    });
}
