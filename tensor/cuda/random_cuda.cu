/* Uniform and normal random numbers on CUDA: the same arithmetic as the CPU kernel
 * (../philox_impl.h), so the two agree bit for bit. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../philox_impl.h"
#include "check.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

/* Consecutive elements handled by one thread: they share Philox blocks, which the
 * thread's reader computes once (a block is 4 words: 4 uniforms or 2 normals). */
#define GC_RANDOM_PER_THREAD 4
#define GC_RANDOM_THREADS 256
/* Enough blocks to fill any current GPU; the grid-stride loop covers larger tensors. */
#define GC_RANDOM_MAX_BLOCKS 4096

/* Groups of GC_RANDOM_PER_THREAD elements in n, the last one possibly shorter. */
static __host__ __device__ size_t group_count(size_t n) {
    return n / GC_RANDOM_PER_THREAD + (n % GC_RANDOM_PER_THREAD != 0);
}

/* dst [n] */
template <typename T>
static __global__ void random_kernel(T *dst, size_t n, gc_random_kind kind, uint64_t seed,
                                     uint64_t offset, double a, double b) {
    size_t groups = group_count(n), stride = (size_t)gridDim.x * blockDim.x;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        gc_philox_reader reader = gc_philox_reader_start(seed);
        size_t begin = g * GC_RANDOM_PER_THREAD;
        size_t end = n - begin < GC_RANDOM_PER_THREAD ? n : begin + GC_RANDOM_PER_THREAD;
        for (size_t i = begin; i < end; i++)
            dst[i] = gc_elem<T>::from_double(gc_philox_sample(&reader, kind, offset, i, a, b));
    }
}

/* dst [n], n > 0 */
template <typename T>
static void launch_random(void *dst, size_t n, gc_random_kind kind, uint64_t seed,
                          uint64_t offset, double a, double b) {
    size_t groups = group_count(n);
    size_t blocks = groups / GC_RANDOM_THREADS + (groups % GC_RANDOM_THREADS != 0);
    if (blocks > GC_RANDOM_MAX_BLOCKS) blocks = GC_RANDOM_MAX_BLOCKS;
    random_kernel<T>
        <<<(unsigned)blocks, GC_RANDOM_THREADS>>>((T *)dst, n, kind, seed, offset, a, b);
    GC_CUDA_CHECK_LAUNCH();
}

/* dst [n] */
extern "C" void gc_cuda_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind,
                               uint64_t seed, uint64_t offset, double a, double b) {
    if (n == 0) return; /* a launch of 0 blocks is an error */
    switch (dtype) {
    case GC_F32: launch_random<float>(dst, n, kind, seed, offset, a, b); break;
    case GC_F16: launch_random<__half>(dst, n, kind, seed, offset, a, b); break;
    case GC_BF16: launch_random<__nv_bfloat16>(dst, n, kind, seed, offset, a, b); break;
    case GC_F64: launch_random<double>(dst, n, kind, seed, offset, a, b); break;
    default: gc_fatal("random: no CUDA kernel for dtype %s", gc_dtype_name(dtype));
    }
}
