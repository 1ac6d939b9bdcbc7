/* Device-side helpers shared by the CUDA kernels (C++ only, included by .cu files).
 *
 *  - gc_elem<T>: how an element of C++ type T is computed with. Arithmetic happens in
 *    gc_elem<T>::acc (float for f32, f16 and bf16; double for f64; int32_t for i32);
 *    to_acc() widens an element exactly and from_acc() stores a result, rounding once to
 *    nearest even for __half and __nv_bfloat16 (as the CPU's gc_f32_to_f16 and
 *    gc_f32_to_bf16 do). from_double() is the CPU's gc_store: a double rounds once into
 *    f16/bf16 (CUDA's __double2half / __double2bfloat16, the CPU's round-to-odd step)
 *    and truncates toward zero into i32, exactly like tensor/cpu/elem_cpu.h.
 *
 *  - gc_cuda_dispatch_float / gc_cuda_dispatch_all: call a generic lambda with a
 *    gc_type_tag<T> for a gc_dtype, so one templated launcher serves every dtype:
 *
 *        gc_cuda_dispatch_float("unary", dtype, [&](auto tag) {
 *            using T = typename decltype(tag)::type;
 *            GC_CUDA_LAUNCH(my_kernel<T>, gc_cuda_blocks(n), (const T *)x, (T *)y, (int64_t)n);
 *        });
 *
 *  - GC_CUDA_LAUNCH / GC_CUDA_GRID_STRIDE: launches with the geometry of
 *    ../launch_impl.h (gc_cuda_blocks: blocks of GC_CUDA_THREADS threads, a one-dimensional
 *    grid capped at GC_CUDA_MAX_BLOCKS), and grid-stride loops with 64-bit indices, so any
 *    element count, 2^31 and more included, works with any grid. GC_CUDA_LAUNCH skips an
 *    empty launch (a grid of 0 blocks is an error) and checks the launch at its file and
 *    line (check.h).
 *
 * The math of the working types needs no wrapper: CUDA overloads exp, log, sqrt, tanh...
 * for float (calling expf, logf...) as for double, so a kernel template written once calls
 * the float function for float and the double one for double.
 *
 * Row reductions add their own pieces on top of these in reduce_common.cuh.
 */
#ifndef GC_TENSOR_DTYPE_CUDA_CUH
#define GC_TENSOR_DTYPE_CUDA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "../backend.h"
#include "../launch_impl.h"
#include "check.h"
#include "gradcache/dtype.h"
#include "gradcache/error.h"

/* --- element types --------------------------------------------------------------- */

template <typename T> struct gc_elem;

template <> struct gc_elem<float> {
    using acc = float;
    __host__ __device__ static float to_acc(float v) { return v; }
    __host__ __device__ static float from_acc(float v) { return v; }
    __host__ __device__ static float from_double(double v) { return (float)v; }
};

template <> struct gc_elem<__half> {
    using acc = float;
    __host__ __device__ static float to_acc(__half v) { return __half2float(v); }
    __host__ __device__ static __half from_acc(float v) { return __float2half_rn(v); }
    __host__ __device__ static __half from_double(double v) { return __double2half(v); }
};

template <> struct gc_elem<__nv_bfloat16> {
    using acc = float;
    __host__ __device__ static float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
    __host__ __device__ static __nv_bfloat16 from_acc(float v) { return __float2bfloat16_rn(v); }
    __host__ __device__ static __nv_bfloat16 from_double(double v) { return __double2bfloat16(v); }
};

template <> struct gc_elem<double> {
    using acc = double;
    __host__ __device__ static double to_acc(double v) { return v; }
    __host__ __device__ static double from_acc(double v) { return v; }
    __host__ __device__ static double from_double(double v) { return v; }
};

template <> struct gc_elem<int32_t> {
    using acc = int32_t;
    __host__ __device__ static int32_t to_acc(int32_t v) { return v; }
    __host__ __device__ static int32_t from_acc(int32_t v) { return v; }
    /* C's conversion: truncation toward zero (CUDA saturates out-of-range values, where
     * C leaves them undefined). */
    __host__ __device__ static int32_t from_double(double v) { return (int32_t)v; }
};

/* The element widened to double: exact for every dtype. */
template <typename T> __host__ __device__ inline double gc_to_double(T v) {
    return (double)gc_elem<T>::to_acc(v);
}

/* --- dtype dispatch ---------------------------------------------------------------- */

template <typename T> struct gc_type_tag {
    using type = T;
};

/* Calls launch(gc_type_tag<T>{}) with the C++ type of a floating dtype; any other dtype
 * stops the program naming `op` (the front-ends check dtypes first, so this only
 * catches a backend called wrongly). */
template <typename F> void gc_cuda_dispatch_float(const char *op, gc_dtype dtype, F &&launch) {
    switch (dtype) {
    case GC_F32: launch(gc_type_tag<float>{}); return;
    case GC_F16: launch(gc_type_tag<__half>{}); return;
    case GC_BF16: launch(gc_type_tag<__nv_bfloat16>{}); return;
    case GC_F64: launch(gc_type_tag<double>{}); return;
    default: gc_fatal("%s: dtype %d is not supported by the CUDA kernel", op, (int)dtype);
    }
}

/* The same, with i32 as well. */
template <typename F> void gc_cuda_dispatch_all(const char *op, gc_dtype dtype, F &&launch) {
    if (dtype == GC_I32) launch(gc_type_tag<int32_t>{});
    else gc_cuda_dispatch_float(op, dtype, launch);
}

/* --- launch geometry ------------------------------------------------------------------ */

/* kernel<<<blocks, threads>>>(args...) on the default stream, checked (with file and line
 * of the launch, see check.h); nothing when blocks is 0. Called through the macros below,
 * which supply the file and line. */
template <typename... Params, typename... Args>
void gc_cuda_launch_at(const char *file, int line, void (*kernel)(Params...), unsigned blocks, unsigned threads,
                       Args... args) {
    if (blocks == 0) return;
    kernel<<<blocks, threads>>>(args...);
    gc_cuda_after_launch(file, line);
}

/* The same with blocks of GC_CUDA_THREADS threads. */
template <typename... Params, typename... Args>
void gc_cuda_launch_default_at(const char *file, int line, void (*kernel)(Params...), unsigned blocks, Args... args) {
    gc_cuda_launch_at(file, line, kernel, blocks, GC_CUDA_THREADS, args...);
}

/* GC_CUDA_LAUNCH(kernel, blocks, args...): blocks of GC_CUDA_THREADS threads.
 * GC_CUDA_LAUNCH_THREADS(kernel, blocks, threads, args...): for kernels whose block size
 * depends on the work (the row reductions). Variadic throughout, so that a kernel named
 * with several template arguments (commas) passes through. */
#define GC_CUDA_LAUNCH(...) gc_cuda_launch_default_at(__FILE__, __LINE__, __VA_ARGS__)
#define GC_CUDA_LAUNCH_THREADS(...) gc_cuda_launch_at(__FILE__, __LINE__, __VA_ARGS__)

/* for (i over [0, n)) spread over every thread of the grid, with 64-bit indices. */
#define GC_CUDA_GRID_STRIDE(i, n)                                                   \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n); \
         i += (int64_t)gridDim.x * blockDim.x)

/* The multi-index of flat element i of a row-major GC_BCAST_DIMS-dim shape (all sizes
 * at least 1), for the kernels that read a strided or broadcast operand. */
__device__ inline void gc_cuda_unravel(int64_t i, const int64_t shape[GC_BCAST_DIMS],
                                       int64_t index[GC_BCAST_DIMS]) {
    for (int d = GC_BCAST_DIMS - 1; d >= 0; d--) {
        index[d] = i % shape[d];
        i /= shape[d];
    }
}

/* sum_d index[d] * stride[d]: the element offset of a multi-index. */
__device__ inline int64_t gc_cuda_offset(const int64_t index[GC_BCAST_DIMS],
                                         const int64_t stride[GC_BCAST_DIMS]) {
    int64_t offset = 0;
    for (int d = 0; d < GC_BCAST_DIMS; d++) offset += index[d] * stride[d];
    return offset;
}

#endif
