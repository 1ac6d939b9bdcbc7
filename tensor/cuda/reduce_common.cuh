/* What the CUDA kernels that reduce rows (reduce_cuda.cu, layernorm_cuda.cu) add to
 * dtype_cuda.cuh: the accumulator of a sum or a max, the launch shape of a row per block,
 * and a block-wide reduction.
 *
 * A row is reduced by one block: each thread folds the elements threadIdx.x,
 * threadIdx.x + blockDim.x, ... in order (coalesced loads, any row length, 10^7 included),
 * then the block combines its threads' values, warps by shuffles and the warps' results
 * through shared memory: a tree of depth log2(blockDim.x) <= 10. So an element of a sum
 * of n terms goes through at most ceil(n / blockDim.x) + 10 roundings; the parity tests
 * (tests/reduce_parity.h) rely on this bound. */
#ifndef GC_TENSOR_CUDA_REDUCE_COMMON_CUH
#define GC_TENSOR_CUDA_REDUCE_COMMON_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype_cuda.cuh"

/* --- accumulator ---------------------------------------------------------------------- */

/* An element of T in the accumulator of a sum or a max over a row: gc_elem<T>'s working
 * type (a half-precision result is rounded once, when stored), except for i32, which
 * sums in int64 so that a row does not overflow before its total is stored. lowest()
 * starts a max (the value left for a row with no element). */
template <typename T> struct gc_row_acc {
    using acc = typename gc_elem<T>::acc;
    static __device__ acc load(T v) { return gc_elem<T>::to_acc(v); }
    static __device__ T store(acc v) { return gc_elem<T>::from_acc(v); }
    static __device__ acc lowest() { return -INFINITY; }
};

/* Stores wrap modulo 2^32, like the two's-complement conversion of every CUDA target. */
template <> struct gc_row_acc<int32_t> {
    using acc = int64_t;
    static __device__ int64_t load(int32_t v) { return v; }
    static __device__ int32_t store(int64_t v) { return (int32_t)v; }
    static __device__ int64_t lowest() { return INT32_MIN; }
};

/* --- launch shape (the geometry is in ../launch_impl.h) ------------------------------------ */

/* GC_ROW_LAUNCH(kernel, rows, cols, args...): kernel<<<gc_row_blocks(rows),
 * gc_row_threads(cols)>>>(args...), checked at the caller's file and line; nothing when
 * rows is 0. */
template <typename... Params, typename... Args>
void gc_row_launch_at(const char *file, int line, void (*kernel)(Params...), size_t rows, size_t cols, Args... args) {
    gc_cuda_launch_at(file, line, kernel, gc_row_blocks(rows), gc_row_threads(cols), args...);
}
#define GC_ROW_LAUNCH(...) gc_row_launch_at(__FILE__, __LINE__, __VA_ARGS__)

/* --- block reduction ----------------------------------------------------------------- */

struct gc_plus {
    template <typename A> __device__ A operator()(A a, A b) const { return a + b; }
};

/* __shfl_down_sync of any trivially copyable value, 32 bits at a time, so that a value and
 * its index (argmax) travel together. */
template <typename A> __device__ __forceinline__ A gc_shfl_down(A value, unsigned offset) {
    static_assert(sizeof(A) % sizeof(unsigned) == 0, "shuffled values are whole 32-bit words");
    unsigned words[sizeof(A) / sizeof(unsigned)];
    memcpy(words, &value, sizeof(A));
    for (unsigned k = 0; k < sizeof(A) / sizeof(unsigned); k++)
        words[k] = __shfl_down_sync(0xffffffffu, words[k], offset);
    memcpy(&value, words, sizeof(A));
    return value;
}

/* Combines the values of lanes [0, width) of a warp into lane 0 (the other lanes end with
 * partial results). Every lane of the warp must call it. */
template <typename A, typename Op> __device__ A gc_warp_reduce(A value, Op op, unsigned width) {
    const unsigned lane = threadIdx.x % 32;
    for (unsigned offset = 16; offset > 0; offset /= 2) {
        A other = gc_shfl_down(value, offset);
        if (lane + offset < width) value = op(value, other);
    }
    return value;
}

/* Combines one value per thread over the block (blockDim.x a multiple of 32) and returns
 * the result to every thread. Every thread of the block must call it. It may be called
 * again at once, with the same shared memory: a call reads warp_values between its two
 * barriers and total after them, and the next call writes warp_values after the first
 * call's second barrier and total after its own first barrier. */
template <typename A, typename Op> __device__ A gc_block_reduce(A value, Op op) {
    __shared__ A warp_values[32];
    __shared__ A total;
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    value = gc_warp_reduce(value, op, 32);
    if (lane == 0) warp_values[warp] = value;
    __syncthreads();
    if (warp == 0) {
        if (lane < warps) value = warp_values[lane];
        value = gc_warp_reduce(value, op, warps);
        if (lane == 0) total = value;
    }
    __syncthreads();
    return total;
}

/* term(0) op term(1) op ... op term(n - 1) over the block, returned to every thread. Each
 * thread starts from `init` (an identity of op) and folds its terms in increasing order. */
template <typename A, typename Term, typename Op>
__device__ A gc_row_reduce(size_t n, A init, Term term, Op op) {
    A value = init;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) value = op(value, term(i));
    return gc_block_reduce(value, op);
}

#endif
