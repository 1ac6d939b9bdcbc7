/* Sum, mean and max over the last dim, and softmax, on CUDA: one block per row of
 * x [rows, cols] (see reduce_common.cuh). Same semantics as tensor/cpu/reduce_cpu.c. */
#include "kernels_cuda.h"
#include "reduce_common.cuh"

namespace {

/* A candidate maximum: its value and its index in the row, -1 before the first element. */
template <typename A> struct argmax_pair {
    A value;
    int64_t index;
};

/* The preferred of two candidates: a NaN over a number (NaN propagates, as in PyTorch),
 * then the larger value, then the smaller index. That is a total order, so the block finds
 * the first maximum (the first NaN) however the row was split between its threads. */
template <typename A> struct argmax_combine {
    __device__ argmax_pair<A> operator()(argmax_pair<A> a, argmax_pair<A> b) const {
        if (b.index < 0) return a;
        if (a.index < 0) return b;
        bool a_nan = a.value != a.value, b_nan = b.value != b.value; /* false for integers */
        if (a_nan != b_nan) return a_nan ? a : b;
        if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
        return a.index < b.index ? a : b;
    }
};

/* max that propagates NaN (fmaxf would drop it). */
struct nan_max {
    template <typename A> __device__ A operator()(A a, A b) const { return a > b || a != a ? a : b; }
};

} // namespace

/* out [rows] = the sum (or the mean, when `mean`) of each row of x [rows, cols]. An empty
 * row sums to 0, so its mean is 0 / 0 = nan (never asked of i32, see below). */
template <typename T>
static __global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    sum_last_kernel(const T *x, T *out, size_t rows, size_t cols, bool mean) {
    using R = gc_row_acc<T>;
    using A = typename R::acc;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        A total = gc_row_reduce(cols, A(0), [&](size_t i) { return R::load(xr[i]); }, gc_plus());
        if (threadIdx.x == 0) out[row] = R::store(mean ? total / (A)cols : total);
    }
}

/* out [rows] = the max of each row of x [rows, cols]; argmax [rows] (when not NULL) = the
 * index of its first occurrence. */
template <typename T>
static __global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    max_last_kernel(const T *x, T *out, int32_t *argmax, size_t rows, size_t cols) {
    using R = gc_row_acc<T>;
    using A = typename R::acc;
    using pair = argmax_pair<A>;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        pair best = gc_row_reduce(cols, pair{R::lowest(), -1},
                                  [&](size_t i) { return pair{R::load(xr[i]), (int64_t)i}; }, argmax_combine<A>());
        if (threadIdx.x == 0) {
            out[row] = R::store(best.value);
            if (argmax) argmax[row] = (int32_t)best.index;
        }
    }
}

/* y [rows, cols] = softmax (or log-softmax) of each row of x [rows, cols], shifted by the
 * row max so that exp never overflows. A row of -inf (or holding a NaN) gives NaNs, as
 * -inf - -inf and NaN do. */
template <typename T>
static __global__ void __launch_bounds__(GC_ROW_MAX_THREADS)
    softmax_last_kernel(const T *x, T *y, size_t rows, size_t cols, bool log_softmax) {
    using A = typename gc_elem<T>::acc;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * cols;
        T *yr = y + row * cols;
        auto load = [&](size_t i) { return gc_elem<T>::to_acc(xr[i]); };
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
        if (op == GC_REDUCE_MAX)
            gc_row_launch(max_last_kernel<T>, rows, cols, (const T *)x, (T *)out, argmax, rows, cols);
        else
            gc_row_launch(sum_last_kernel<T>, rows, cols, (const T *)x, (T *)out, rows, cols, op == GC_REDUCE_MEAN);
    });
}

extern "C" void gc_cuda_softmax_last(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype,
                                     bool log_softmax) {
    if (rows == 0 || cols == 0) return;
    gc_cuda_dispatch_float("softmax_last", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        gc_row_launch(softmax_last_kernel<T>, rows, cols, (const T *)x, (T *)y, rows, cols, log_softmax);
    });
}
