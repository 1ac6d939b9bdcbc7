/* Fused attention on CUDA: the semantics of tensor/cpu/attention_cpu.c, the per-element
 * arithmetic of ../attention_impl.h (the same hidden keys, the same dropout words, the same
 * online softmax and logit gradient). Correctness first, not yet tuned:
 *
 *  - one warp per row: its lanes hold a query's (or key's) dims, lane d, d + 32, ...
 *    (head_dim <= 32 DIMS_PER_LANE); a dot product is a warp sum (a butterfly, so every lane
 *    holds the same bits), and the keys are walked one at a time with the online softmax in
 *    registers, f32 accumulation for f16 and bf16;
 *  - backward as FlashAttention-2, without atomics so that the results are deterministic:
 *    one kernel for D = rowsum(dO o O), one for dq (a warp per query row, over the keys) and
 *    one for dk and dv (a warp per key row, over its G query heads' rows), each recomputing
 *    the probabilities from the forward's log-sum-exp.
 * Left for later: tiles of keys and values through shared memory, and tensor cores for the
 * 16-bit dtypes. */
#include "../attention_impl.h"
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

#define WARP 32
#define WARPS_PER_BLOCK 4
#define DIMS_PER_LANE 8 /* head_dim up to 256 */

#define ATTENTION_OVERLOADS(T)                                                                          \
    __device__ inline T logit(T dot, T scale, T bias, bool hidden) {                                   \
        return gc_attention_logit_##T(dot, scale, gc_attention_bias_##T(bias, hidden));                 \
    }                                                                                                  \
    __device__ inline T rescale(T *max, T tile_max) { return gc_attention_rescale_##T(max, tile_max); } \
    __device__ inline T row_lse(T max, T sum) { return gc_attention_lse_##T(max, sum); }                \
    __device__ inline T logit_grad(T prob, T dprob, T row_dot) {                                       \
        return gc_attention_logit_grad_##T(prob, dprob, row_dot);                                       \
    }
ATTENTION_OVERLOADS(float)
ATTENTION_OVERLOADS(double)

template <typename W> __device__ W warp_sum(W x) {
    for (int lanes = WARP / 2; lanes > 0; lanes /= 2) x += __shfl_xor_sync(0xffffffffu, x, lanes);
    return x;
}

/* A row of head_dim elements of T, in the lanes' registers as W (0 past head_dim). */
template <typename T, typename W> __device__ void load_row(const T *row, int64_t head_dim, W *dims) {
    for (int c = 0; c < DIMS_PER_LANE; c++) {
        int64_t d = (int64_t)threadIdx.x % WARP + (int64_t)c * WARP;
        dims[c] = d < head_dim ? (W)gc_elem<T>::to_acc(row[d]) : (W)0;
    }
}

/* x . y over the warp, the rows in registers. */
template <typename W> __device__ W warp_dot(const W *x, const W *y) {
    W sum = 0;
    for (int c = 0; c < DIMS_PER_LANE; c++) sum += x[c] * y[c];
    return warp_sum(sum);
}

template <typename S, typename W> __device__ void store_row(S *row, int64_t head_dim, const W *dims, W factor) {
    for (int c = 0; c < DIMS_PER_LANE; c++) {
        int64_t d = (int64_t)threadIdx.x % WARP + (int64_t)c * WARP;
        if (d < head_dim) row[d] = gc_elem<S>::from_acc(dims[c] * factor);
    }
}

/* for (row over [0, rows)), one warp per row over the grid. */
#define WARP_ROWS(row, rows)                                                                                 \
    for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP; row < (int64_t)(rows);      \
         row += (int64_t)gridDim.x * blockDim.x / WARP)

/* The logit of (query row `row`, key j) from the dot product: bias and hiding. */
template <typename T, typename W> __device__ W row_logit(const gc_attention_args &a, int64_t row, int64_t j, W dot) {
    int64_t i = row % a.length;
    W bias = a.bias.data ? (W)gc_elem<T>::to_acc(((const T *)a.bias.data)[gc_softmax_bias_offset(&a.bias, (size_t)row) + j])
                         : (W)0;
    return logit(dot, (W)a.scale, bias, gc_attention_hidden(i, j, a.causal, a.window));
}

/* The first row of query row `row`'s key/value head. */
__device__ int64_t kv_row0(const gc_attention_args &a, int64_t row) {
    int64_t head = row / a.length, b = head / a.heads, h = head % a.heads;
    return (b * a.kv_heads + h / (a.heads / a.kv_heads)) * a.length;
}

template <typename T> __global__ void forward_kernel(gc_attention_args a) {
    using W = typename gc_elem<T>::acc;
    int64_t dh = a.head_dim;
    WARP_ROWS(row, a.batch * a.heads * a.length) {
        const T *keys = (const T *)a.k + kv_row0(a, row) * dh, *values = (const T *)a.v + kv_row0(a, row) * dh;
        W query[DIMS_PER_LANE], context[DIMS_PER_LANE] = {}, key[DIMS_PER_LANE], value[DIMS_PER_LANE];
        load_row((const T *)a.q + row * dh, dh, query);
        W max = -INFINITY, sum = 0;
        gc_philox_reader reader = gc_philox_reader_start(a.seed);
        for (int64_t j = 0; j < a.length; j++) {
            load_row(keys + j * dh, dh, key);
            W p = row_logit<T>(a, row, j, warp_dot(query, key));
            W factor = rescale(&max, p);
            p = exp(p - max);
            sum = sum * factor + p;
            if (!gc_attention_keep(&reader, a.offset, row, a.length, j, a.threshold)) p = 0;
            load_row(values + j * dh, dh, value);
            for (int c = 0; c < DIMS_PER_LANE; c++) context[c] = context[c] * factor + p * value[c];
        }
        if (threadIdx.x % WARP == 0) ((W *)a.lse)[row] = row_lse(max, sum);
        store_row((T *)a.out + row * dh, dh, context, (W)a.keep_scale / sum);
    }
}

/* D = rowsum(dO o O) of every query row. */
template <typename T> __global__ void row_dot_kernel(gc_attention_args a) {
    using W = typename gc_elem<T>::acc;
    int64_t dh = a.head_dim;
    WARP_ROWS(row, a.batch * a.heads * a.length) {
        W grad[DIMS_PER_LANE], out[DIMS_PER_LANE];
        load_row((const T *)a.grad_out + row * dh, dh, grad);
        load_row((const T *)a.out + row * dh, dh, out);
        W dot = warp_dot(grad, out);
        if (threadIdx.x % WARP == 0) ((W *)a.row_dot)[row] = dot;
    }
}

/* The gradient of logit (row, j) scaled by a.scale, and the probability the context saw
 * (dropped, times 1 / (1 - p)), from the dot products q . k and dO . v. */
template <typename T, typename W>
__device__ W logit_gradient(const gc_attention_args &a, gc_philox_reader *reader, int64_t row, int64_t j, W qk,
                            W grad_v, W *kept_prob) {
    W p = exp(row_logit<T>(a, row, j, qk) - ((const W *)a.lse)[row]);
    bool keep = gc_attention_keep(reader, a.offset, row, a.length, j, a.threshold);
    *kept_prob = keep ? p * (W)a.keep_scale : (W)0;
    W dprob = keep ? grad_v * (W)a.keep_scale : (W)0;
    return logit_grad(p, dprob, ((const W *)a.row_dot)[row]) * (W)a.scale;
}

template <typename T> __global__ void dq_kernel(gc_attention_args a) {
    using W = typename gc_elem<T>::acc;
    int64_t dh = a.head_dim;
    WARP_ROWS(row, a.batch * a.heads * a.length) {
        const T *keys = (const T *)a.k + kv_row0(a, row) * dh, *values = (const T *)a.v + kv_row0(a, row) * dh;
        W query[DIMS_PER_LANE], grad[DIMS_PER_LANE], key[DIMS_PER_LANE], value[DIMS_PER_LANE], dq[DIMS_PER_LANE] = {};
        load_row((const T *)a.q + row * dh, dh, query);
        load_row((const T *)a.grad_out + row * dh, dh, grad);
        gc_philox_reader reader = gc_philox_reader_start(a.seed);
        for (int64_t j = 0; j < a.length; j++) {
            load_row(keys + j * dh, dh, key);
            load_row(values + j * dh, dh, value);
            W kept;
            W ds = logit_gradient<T>(a, &reader, row, j, warp_dot(query, key), warp_dot(grad, value), &kept);
            for (int c = 0; c < DIMS_PER_LANE; c++) dq[c] += ds * key[c];
        }
        store_row((W *)a.dq + row * dh, dh, dq, (W)1);
    }
}

/* dk and dv of every key row: the sum over its G query heads' rows. */
template <typename T> __global__ void dkv_kernel(gc_attention_args a) {
    using W = typename gc_elem<T>::acc;
    int64_t dh = a.head_dim, groups = a.heads / a.kv_heads;
    WARP_ROWS(key_row, a.batch * a.kv_heads * a.length) {
        int64_t j = key_row % a.length, kv_head = key_row / a.length; /* b KVH + kvh */
        int64_t first = ((kv_head / a.kv_heads) * a.heads + kv_head % a.kv_heads * groups) * a.length;
        W key[DIMS_PER_LANE], value[DIMS_PER_LANE], query[DIMS_PER_LANE], grad[DIMS_PER_LANE];
        W dk[DIMS_PER_LANE] = {}, dv[DIMS_PER_LANE] = {};
        load_row((const T *)a.k + key_row * dh, dh, key);
        load_row((const T *)a.v + key_row * dh, dh, value);
        gc_philox_reader reader = gc_philox_reader_start(a.seed);
        for (int64_t row = first; row < first + groups * a.length; row++) {
            load_row((const T *)a.q + row * dh, dh, query);
            load_row((const T *)a.grad_out + row * dh, dh, grad);
            W kept;
            W ds = logit_gradient<T>(a, &reader, row, j, warp_dot(query, key), warp_dot(grad, value), &kept);
            for (int c = 0; c < DIMS_PER_LANE; c++) {
                dv[c] += kept * grad[c];
                dk[c] += ds * query[c];
            }
        }
        store_row((W *)a.dk + key_row * dh, dh, dk, (W)1);
        store_row((W *)a.dv + key_row * dh, dh, dv, (W)1);
    }
}

/* Blocks of WARPS_PER_BLOCK warps for one warp per row. */
unsigned warp_blocks(int64_t rows) {
    int64_t blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    return (unsigned)(blocks < GC_CUDA_MAX_BLOCKS ? blocks : GC_CUDA_MAX_BLOCKS);
}

void check_head_dim(const char *op, const gc_attention_args *a) {
    if (a->head_dim > (int64_t)WARP * DIMS_PER_LANE)
        gc_fatal("%s: head_dim %lld is above the CUDA kernel's %d", op, (long long)a->head_dim, WARP * DIMS_PER_LANE);
}

} // namespace

extern "C" void gc_cuda_attention_forward(const gc_attention_args *args) {
    check_head_dim("attention_fused", args);
    gc_cuda_dispatch_float("attention_fused", args->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        GC_CUDA_LAUNCH_THREADS(forward_kernel<T>, warp_blocks(args->batch * args->heads * args->length),
                               WARP * WARPS_PER_BLOCK, *args);
    });
}

extern "C" void gc_cuda_attention_backward(const gc_attention_args *args) {
    check_head_dim("attention_fused_backward", args);
    gc_cuda_dispatch_float("attention_fused_backward", args->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        unsigned query_blocks = warp_blocks(args->batch * args->heads * args->length);
        GC_CUDA_LAUNCH_THREADS(row_dot_kernel<T>, query_blocks, WARP * WARPS_PER_BLOCK, *args);
        GC_CUDA_LAUNCH_THREADS(dq_kernel<T>, query_blocks, WARP * WARPS_PER_BLOCK, *args);
        GC_CUDA_LAUNCH_THREADS(dkv_kernel<T>, warp_blocks(args->batch * args->kv_heads * args->length),
                               WARP * WARPS_PER_BLOCK, *args);
    });
}
