/* Sum, mean and max over the last dim, sums over middle dims (sum_middle), and softmax, on
 * CUDA. Same semantics as tensor/cpu/reduce_cpu.c.
 *
 * A row is reduced by one block (reduce_common.cuh), which fills the GPU when there are
 * many rows. A few long rows (sum_all and mean_all are one row of every element) are split:
 * each row into `splits` segments, one block per segment writing a partial result into the
 * workspace's scratch, then one block per row combining its partials in order. sum_middle
 * splits its summed dims likewise when its tiles of columns are few. The splits
 * (../launch_impl.h) depend on the sizes only, never on the GPU, so a result is the same on
 * every device and every run: deterministic.
 *
 * The scratch is one per device, and the two launches of a split run on the device's one
 * (legacy default) stream, where they follow each other only if no other host thread puts a
 * split of its own between them: the launches of a split are made under the device's lock,
 * so that each split's partials are read before the next split writes them. */
#include <mutex>

#include "kernels_cuda.h"
#include "reduce_common.cuh"
#include "workspace_cuda.h"

namespace {

/* A candidate maximum: its value and its index in the row, -1 before the first element. */
template <typename A> struct argmax_pair {
    A value;
    int64_t index;
};

/* The reductions, each a value type and four pieces the kernels below put together:
 * identity(), term(row, i) for element i of a row, the combination (operator()), and
 * store() of a row's result. */

/* Sum, or mean when `mean`. An empty row sums to 0, so its mean is 0 / 0 = nan (never asked
 * of i32: the front-end allows no mean of integers). */
template <typename T> struct row_sum {
    using R = gc_row_acc<T>;
    using value = typename R::acc;
    bool mean;
    __device__ value identity() const { return value(0); }
    __device__ value term(const T *row, size_t i) const { return R::load(row[i]); }
    __device__ value operator()(value a, value b) const { return a + b; }
    __device__ void store(T *out, int32_t *argmax, size_t row, value total, size_t cols) const {
        (void)argmax;
        out[row] = R::store(mean ? total / (value)cols : total);
    }
};

/* Max, and the index of its first occurrence into argmax (when not NULL). The preferred of
 * two candidates: a NaN over a number (NaN propagates, as in PyTorch), then the larger value,
 * then the smaller index. That is a total order, so the first maximum (the first NaN) comes
 * out however the row was split between threads and blocks. */
template <typename T> struct row_max {
    using R = gc_row_acc<T>;
    using A = typename R::acc;
    using value = argmax_pair<A>;
    __device__ value identity() const { return value{R::lowest(), -1}; }
    __device__ value term(const T *row, size_t i) const { return value{R::load(row[i]), (int64_t)i}; }
    __device__ value operator()(value a, value b) const {
        if (b.index < 0) return a;
        if (a.index < 0) return b;
        bool a_nan = a.value != a.value, b_nan = b.value != b.value; /* false for integers */
        if (a_nan != b_nan) return a_nan ? a : b;
        if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
        return a.index < b.index ? a : b;
    }
    __device__ void store(T *out, int32_t *argmax, size_t row, value best, size_t cols) const {
        (void)cols;
        out[row] = R::store(best.value);
        if (argmax) argmax[row] = (int32_t)best.index;
    }
};

/* max that propagates NaN (fmaxf would drop it). */
struct nan_max {
    template <typename A> __device__ A operator()(A a, A b) const { return a > b || a != a ? a : b; }
};

/* x [rows, cols] -> out [rows] (argmax [rows]): one block per row. */
template <typename T, typename Reduction>
__global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    reduce_rows_kernel(Reduction reduction, const T *x, T *out, int32_t *argmax, size_t rows, size_t cols) {
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        auto result = gc_row_reduce(cols, reduction.identity(), [&](size_t i) { return reduction.term(xr, i); },
                                    reduction);
        if (threadIdx.x == 0) reduction.store(out, argmax, row, result, cols);
    }
}

/* The first pass of a split: x [rows, cols] -> partials [rows, splits], block b reducing
 * its segment of its row (gc_reduce_segment). */
template <typename T, typename Reduction>
__global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    reduce_segments_kernel(Reduction reduction, const T *x, typename Reduction::value *partials, size_t rows,
                           size_t cols, size_t splits) {
    for (size_t b = blockIdx.x; b < rows * splits; b += gridDim.x) {
        size_t row, begin, end;
        gc_reduce_segment(b, splits, cols, &row, &begin, &end);
        const T *xr = x + row * cols;
        /* the index within the row, not the segment: the argmax of a max */
        auto result = gc_row_reduce(end - begin, reduction.identity(),
                                    [&](size_t i) { return reduction.term(xr, begin + i); }, reduction);
        if (threadIdx.x == 0) partials[b] = result;
    }
}

/* The second pass: partials [rows, splits] -> out [rows] (argmax [rows]), in order. */
template <typename T, typename Reduction>
__global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    reduce_partials_kernel(Reduction reduction, const typename Reduction::value *partials, T *out, int32_t *argmax,
                           size_t rows, size_t splits, size_t cols) {
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const typename Reduction::value *pr = partials + row * splits;
        auto result = gc_row_reduce(splits, reduction.identity(), [&](size_t i) { return pr[i]; }, reduction);
        if (threadIdx.x == 0) reduction.store(out, argmax, row, result, cols);
    }
}

/* x [outer, mid, inner] -> out [outer, inner] summed over mid, or with splits > 1 ->
 * partials [outer, splits, inner], each the sum over one segment of mid. Block b takes one
 * tile of columns and one segment (gc_middle_block): lane l of warp w adds rows begin + w,
 * begin + w + GC_MIDDLE_WARPS, ... of column first_col + l in order, then warp 0 adds the
 * warps' sums in order, w = 0 first. */
template <typename T>
__global__ void __launch_bounds__(GC_CUDA_THREADS)
    middle_segments_kernel(const T *x, T *out, typename gc_row_acc<T>::acc *partials, size_t outer, size_t mid,
                           size_t inner, size_t splits) {
    using R = gc_row_acc<T>;
    using A = typename R::acc;
    __shared__ A warp_sums[GC_MIDDLE_WARPS][GC_MIDDLE_TILE];
    const unsigned lane = threadIdx.x % GC_MIDDLE_TILE, warp = threadIdx.x / GC_MIDDLE_TILE;
    for (size_t b = blockIdx.x; b < gc_middle_tiles(outer, inner) * splits; b += gridDim.x) {
        size_t o, first_col, begin, end;
        gc_middle_block(b, splits, mid, inner, &o, &first_col, &begin, &end);
        size_t col = first_col + lane;
        A sum = A(0);
        if (col < inner) {
            const T *row = x + (o * mid + begin + warp) * inner + col;
#pragma unroll 4
            for (size_t m = begin + warp; m < end; m += GC_MIDDLE_WARPS, row += GC_MIDDLE_WARPS * inner)
                sum += R::load(*row);
        }
        warp_sums[warp][lane] = sum;
        __syncthreads();
        if (warp == 0 && col < inner) {
            A total = warp_sums[0][lane];
            for (unsigned w = 1; w < GC_MIDDLE_WARPS; w++) total += warp_sums[w][lane];
            if (splits == 1) out[o * inner + col] = R::store(total);
            else partials[(o * splits + b % splits) * inner + col] = total;
        }
        __syncthreads(); /* warp_sums is read before the next tile writes it */
    }
}

/* The second pass of a split: partials [outer, splits, inner] -> out [outer, inner], each
 * output adding its partials in order, segment 0 first. */
template <typename T>
__global__ void middle_partials_kernel(const typename gc_row_acc<T>::acc *partials, T *out, size_t splits,
                                       size_t inner, int64_t n) {
    using R = gc_row_acc<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        size_t o = (size_t)i / inner, col = (size_t)i % inner;
        const typename R::acc *p = partials + o * splits * inner + col;
        typename R::acc total = p[0];
        for (size_t s = 1; s < splits; s++) total += p[s * inner];
        out[i] = R::store(total);
    }
}

} // namespace

/* Held while a split's two launches are queued: one lock per device, shared by every dtype
 * and reduction, as the scratch is. */
static std::mutex split_locks[GC_MAX_CUDA_DEVICES];

/* x [rows, cols] -> out [rows] (argmax [rows]) with one reduction, split or not. */
template <typename T, typename Reduction>
static void reduce(Reduction reduction, const T *x, T *out, int32_t *argmax, size_t rows, size_t cols) {
    using V = typename Reduction::value;
    static_assert(GC_REDUCE_MAX_PARTIALS * sizeof(V) <= GC_CUDA_REDUCE_SCRATCH_BYTES, "the scratch holds the partials");
    size_t splits = gc_reduce_splits(rows, cols);
    if (splits == 1) {
        GC_ROW_LAUNCH(reduce_rows_kernel<T, Reduction>, rows, cols, reduction, x, out, argmax, rows, cols);
        return;
    }
    int device = gc_cuda_current_device();
    std::lock_guard<std::mutex> hold(split_locks[device]);
    V *partials = (V *)gc_cuda_workspace_of(device)->reduce_scratch;
    GC_CUDA_LAUNCH_THREADS(reduce_segments_kernel<T, Reduction>, (unsigned)(rows * splits), GC_ROW_MAX_THREADS,
                           reduction, x, partials, rows, cols, splits);
    GC_ROW_LAUNCH(reduce_partials_kernel<T, Reduction>, rows, splits, reduction, (const V *)partials, out, argmax,
                  rows, splits, cols);
}

/* x [outer, mid, inner] -> out [outer, inner]. A split's launches hold the device's lock,
 * as a split row reduction's do: they share the scratch. */
template <typename T> static void sum_middle(const T *x, T *out, size_t outer, size_t mid, size_t inner) {
    using A = typename gc_row_acc<T>::acc;
    static_assert(GC_MIDDLE_MAX_PARTIALS * sizeof(A) <= GC_CUDA_REDUCE_SCRATCH_BYTES, "the scratch holds the partials");
    size_t splits = gc_middle_splits(outer, mid, inner);
    unsigned blocks = gc_middle_blocks(outer, inner, splits);
    if (splits == 1) {
        GC_CUDA_LAUNCH(middle_segments_kernel<T>, blocks, x, out, (A *)nullptr, outer, mid, inner, splits);
        return;
    }
    int device = gc_cuda_current_device();
    std::lock_guard<std::mutex> hold(split_locks[device]);
    A *partials = (A *)gc_cuda_workspace_of(device)->reduce_scratch;
    GC_CUDA_LAUNCH(middle_segments_kernel<T>, blocks, x, out, partials, outer, mid, inner, splits);
    int64_t n = (int64_t)(outer * inner);
    GC_CUDA_LAUNCH(middle_partials_kernel<T>, gc_cuda_blocks(n), (const A *)partials, out, splits, inner, n);
}

/* y [rows, cols] = softmax (or log-softmax) of each row of scale x + bias (x [rows, cols];
 * the bias row of op_params.h's gc_softmax_bias, when `bias` is not NULL), shifted by the
 * row max so that exp never overflows. A row of -inf (or holding a NaN) gives NaNs, as
 * -inf - -inf and NaN do. The scaled, biased row is computed again at each pass over it
 * (three loads of x, as the unbiased kernel) rather than stored: it stays in the
 * accumulator's precision. */
template <typename T>
static __global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    softmax_last_kernel(const T *x, T *y, size_t rows, size_t cols, bool log_softmax,
                        typename gc_elem<T>::acc scale, const T *bias, gc_softmax_bias geometry) {
    using A = typename gc_elem<T>::acc;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        const T *br = bias ? bias + gc_softmax_bias_offset(&geometry, row) : nullptr;
        T *yr = y + row * cols;
        auto load = [&](size_t i) {
            A scaled = gc_elem<T>::to_acc(xr[i]) * scale;
            return br ? scaled + gc_elem<T>::to_acc(br[i]) : scaled;
        };
        A row_max = gc_row_reduce(cols, A(-INFINITY), load, nan_max());
        auto shifted_exp = [&](size_t i) { return exp(load(i) - row_max); };
        A sum = gc_row_reduce(cols, A(0), shifted_exp, gc_plus());
        A log_sum = log(sum);
        for (size_t i = threadIdx.x; i < cols; i += blockDim.x) {
            A shifted = load(i) - row_max;
            yr[i] = gc_elem<T>::from_acc(log_softmax ? shifted - log_sum : exp(shifted) / sum);
        }
    }
}

extern "C" void gc_cuda_reduce_last(gc_reduce_op op, const void *x, void *out, int32_t *argmax,
                                    size_t rows, size_t cols, gc_dtype dtype) {
    if (rows == 0) return;
    /* The front-end allows i32 for SUM and MAX only; a mean would divide integers. */
    if (dtype == GC_I32 && op == GC_REDUCE_MEAN) gc_fatal("reduce_last: no mean of an i32 tensor");
    gc_cuda_dispatch_all("reduce_last", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (op == GC_REDUCE_MAX) reduce(row_max<T>{}, (const T *)x, (T *)out, argmax, rows, cols);
        else reduce(row_sum<T>{op == GC_REDUCE_MEAN}, (const T *)x, (T *)out, nullptr, rows, cols);
    });
}

/* A column (inner 1) is a row of mid: reduce_last's kernels, which spread one row over a
 * block rather than one lane of a tile. */
extern "C" void gc_cuda_sum_middle(const void *x, void *out, size_t outer, size_t mid, size_t inner,
                                   gc_dtype dtype) {
    if (outer == 0 || inner == 0) return;
    gc_cuda_dispatch_all("sum_middle", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (inner == 1) reduce(row_sum<T>{false}, (const T *)x, (T *)out, nullptr, outer, mid);
        else sum_middle((const T *)x, (T *)out, outer, mid, inner);
    });
}

extern "C" void gc_cuda_softmax_last(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype,
                                     bool log_softmax, double scale, const gc_softmax_bias *bias) {
    if (rows == 0 || cols == 0) return;
    gc_softmax_bias geometry = bias ? *bias : gc_softmax_bias{nullptr, 1, 1, 0, 0};
    gc_cuda_dispatch_float("softmax_last", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = typename gc_elem<T>::acc;
        GC_ROW_LAUNCH(softmax_last_kernel<T>, rows, cols, (const T *)x, (T *)y, rows, cols, log_softmax, (A)scale,
                      (const T *)geometry.data, geometry);
    });
}
