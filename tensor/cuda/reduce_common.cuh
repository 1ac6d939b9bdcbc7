/* Building blocks of the CUDA kernels that reduce rows (reduce_cuda.cu, layernorm_cuda.cu):
 * element access in the accumulation type, dtype dispatch, launch shapes and a block-wide
 * reduction.
 *
 * A row is reduced by one block: each thread folds the elements threadIdx.x,
 * threadIdx.x + blockDim.x, ... in order (coalesced loads, any row length, 10^7 included),
 * then the block combines its threads' values, warps by shuffles and the warps' results
 * through shared memory: a tree of depth log2(blockDim.x) <= 10. So an element of a sum
 * of n terms goes through at most ceil(n / blockDim.x) + 10 roundings; the parity tests
 * (tests/reduce_parity.h) rely on this bound. */
#ifndef GC_TENSOR_CUDA_REDUCE_COMMON_CUH
#define GC_TENSOR_CUDA_REDUCE_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gradcache/dtype.h"
#include "gradcache/error.h"

/* --- elements ------------------------------------------------------------------------ */

/* An element type T seen in its accumulation type `acc`: f16, bf16 and f32 compute in
 * float, so a half-precision result is rounded once, when stored; f64 in double; i32 in
 * int64, so that a sum of i32 does not overflow before it is stored. lowest() starts a
 * max (the value left for a row with no element). */
template <typename T> struct gc_elem;

template <> struct gc_elem<float> {
    using acc = float;
    static __device__ float load(float v) { return v; }
    static __device__ float store(float v) { return v; }
    static __device__ float lowest() { return -INFINITY; }
};

template <> struct gc_elem<__half> {
    using acc = float;
    static __device__ float load(__half v) { return __half2float(v); }
    static __device__ __half store(float v) { return __float2half_rn(v); }
    static __device__ float lowest() { return -INFINITY; }
};

template <> struct gc_elem<__nv_bfloat16> {
    using acc = float;
    static __device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
    static __device__ float lowest() { return -INFINITY; }
};

template <> struct gc_elem<double> {
    using acc = double;
    static __device__ double load(double v) { return v; }
    static __device__ double store(double v) { return v; }
    static __device__ double lowest() { return -INFINITY; }
};

/* Stores wrap modulo 2^32, like the two's-complement conversion of every CUDA target. */
template <> struct gc_elem<int32_t> {
    using acc = int64_t;
    static __device__ int64_t load(int32_t v) { return v; }
    static __device__ int32_t store(int64_t v) { return (int32_t)v; }
    static __device__ int64_t lowest() { return INT32_MIN; }
};

/* The math of the floating accumulation types, overloaded so that a kernel template
 * written once calls expf for float and exp for double. */
static __device__ __forceinline__ float gc_exp(float v) { return expf(v); }
static __device__ __forceinline__ double gc_exp(double v) { return exp(v); }
static __device__ __forceinline__ float gc_log(float v) { return logf(v); }
static __device__ __forceinline__ double gc_log(double v) { return log(v); }
static __device__ __forceinline__ float gc_sqrt(float v) { return sqrtf(v); }
static __device__ __forceinline__ double gc_sqrt(double v) { return sqrt(v); }

/* --- dispatch and launch shapes ------------------------------------------------------ */

template <typename T> struct gc_type_tag {
    using type = T;
};

/* Calls f(gc_type_tag<T>()) with T the element type of `dtype`: a floating type, or int32_t
 * when WithInt. Any other dtype is a programmer error of the front-end named `op`. */
template <bool WithInt, typename F> static void gc_dispatch(gc_dtype dtype, const char *op, F f) {
    switch (dtype) {
    case GC_F32: f(gc_type_tag<float>()); return;
    case GC_F16: f(gc_type_tag<__half>()); return;
    case GC_BF16: f(gc_type_tag<__nv_bfloat16>()); return;
    case GC_F64: f(gc_type_tag<double>()); return;
    case GC_I32:
        if constexpr (WithInt) {
            f(gc_type_tag<int32_t>());
            return;
        }
        break;
    default: break;
    }
    gc_fatal("%s: no CUDA kernel for dtype %s", op, gc_dtype_name(dtype));
}

/* The kernels are compiled for blocks of up to this many threads (__launch_bounds__), so a
 * launch never fails for want of registers. */
#define GC_ROW_MAX_THREADS 1024
/* Enough blocks to fill any GPU many times over; the kernels loop over the rows beyond. */
#define GC_ROW_MAX_BLOCKS 65536

/* Threads per block for rows of `cols` elements: one per element up to 1024, in whole
 * warps (gc_block_reduce shuffles across full warps). */
static inline unsigned gc_row_threads(size_t cols) {
    size_t warps = (cols + 31) / 32;
    if (warps < 1) warps = 1;
    if (warps > GC_ROW_MAX_THREADS / 32) warps = GC_ROW_MAX_THREADS / 32;
    return (unsigned)(32 * warps);
}

/* One block per row, capped at GC_ROW_MAX_BLOCKS; rows must be > 0. */
static inline unsigned gc_row_blocks(size_t rows) {
    return (unsigned)(rows < GC_ROW_MAX_BLOCKS ? rows : GC_ROW_MAX_BLOCKS);
}

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
