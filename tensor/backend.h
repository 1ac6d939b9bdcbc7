/* The one dispatch point between the ops and the kernels.
 *
 * An op (tensor/op_*.c) checks shapes, dtypes and devices, allocates its output, and
 * calls the kernel of the backend that owns the device: gc_backend_for(device)->kernel.
 * Kernels see raw, contiguous arrays and sizes only; they never allocate tensors, never
 * check shapes and never fail (allocation, the only recoverable failure, has already
 * happened). The CPU backend (tensor/cpu/) is the readable reference; the CUDA backend
 * (tensor/cuda/) has the same semantics. */
#ifndef GC_TENSOR_BACKEND_H
#define GC_TENSOR_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/config.h"
#include "gradcache/device.h"
#include "gradcache/dtype.h"
#include "gradcache/tensor.h"
#include "op_params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Index arithmetic of a broadcasting binary op, always over GC_BCAST_DIMS dims (shapes
 * right-aligned and padded with leading 1s). out[i0,i1,i2,i3] = a[...] op b[...], where
 * the element of a is at sum_k i_k * a_stride[k] (stride 0 along a broadcast dim). */
#define GC_BCAST_DIMS 4
typedef struct gc_broadcast {
    int64_t out_shape[GC_BCAST_DIMS];
    int64_t a_stride[GC_BCAST_DIMS]; /* in elements */
    int64_t b_stride[GC_BCAST_DIMS];
    int64_t numel;                   /* product of out_shape */
} gc_broadcast;

/* c = alpha * op(a) @ op(b) + beta * c, row-major, for each of `batch` matrices.
 * a is [m, k] ([k, m] when trans_a), b is [k, n] ([n, k] when trans_b), c is [m, n];
 * consecutive batches are m*k, k*n and m*n elements apart. */
typedef struct gc_matmul_args {
    const void *a;
    const void *b;
    void *c;
    gc_dtype dtype;
    int64_t batch, m, n, k;
    bool trans_a, trans_b;
    float alpha, beta;
} gc_matmul_args;

/* A permutation of a contiguous tensor of ndim <= 4 dims into a contiguous copy:
 * out shape[i] = in_shape[perm[i]]. */
typedef struct gc_permute_args {
    int ndim;
    int64_t in_shape[GC_BCAST_DIMS];
    int perm[GC_BCAST_DIMS];
} gc_permute_args;

/* Where indices are checked against their range (backend check_index), for the message
 * that names a bad one: "<op>: <what> 7 at position 1 of <what>s [3] i32 cpu is outside
 * [0, 4)". op and what are string literals (a CUDA backend reports later, from a copy). */
typedef struct gc_index_site {
    const char *op;   /* "embedding" */
    const char *what; /* one index: "id" */
    int64_t bound;    /* valid indices: [0, bound) */
    int ndim;         /* the index tensor's shape and device */
    int64_t shape[GC_MAX_DIMS];
    gc_device device;
} gc_index_site;

/* One array of a multi-tensor kernel: numel elements of dtype at data (device memory). */
typedef struct gc_span {
    const void *data;
    int64_t numel;
    gc_dtype dtype;
} gc_span;
/* One tile of the tiled contrastive loss (nn/contrastive_tiled.c): a block of queries
 * (rows) against a block of candidates (columns). `scores` holds the block's dot products
 * q_i . p_j, and the score of element (i, j) is s_ij = scores[i, j] row_scale[i] col_scale[j]
 * (the temperature and cosine's inverse norms are folded into the scales). Every vector points
 * at the tile's own rows or columns; floats are of `dtype`, f32 or f64. The arithmetic is
 * tensor/score_tile_impl.h's, shared by every backend. */
typedef struct gc_score_tile_args {
    void *scores;                  /* [rows, cols]: overwritten (see the kernels) */
    const void *row_scale;         /* [rows] */
    const void *col_scale;         /* [cols] */
    const int32_t *targets;        /* [rows]: each row's positive, a column of the whole matrix */
    int64_t rows, cols, col_start; /* col_start: the whole matrix's column of the tile's column 0 */
    gc_dtype dtype;
    /* score_tile_lse: the running log-sum-exp (max, sum) of each row, and of each column when
     * col_max is not NULL (score_tile_impl.h); target_score [rows] receives s_i,targets[i] for
     * the rows whose positive is one of the tile's columns. */
    void *row_max, *row_sum;       /* [rows] */
    void *col_max, *col_sum;       /* [cols] or NULL */
    void *target_score;            /* [rows] */
    /* score_tile_grad: d loss / d s_ij = row_weight exp(s_ij - row_lse[i])
     *   + col_weight[j] exp(s_ij - col_lse[j]) (when col_lse is not NULL)
     *   - target_weight (when j is row i's positive) */
    const void *row_lse;           /* [rows] */
    const void *col_lse, *col_weight; /* [cols] or NULL */
    double row_weight, target_weight;
} gc_score_tile_args;

typedef struct gc_backend {
    const char *name;

    /* --- memory (bytes; these never count: the allocator in tensor/alloc.c does) --- */
    /* NULL when the device is full; a request of 0 bytes gets a unique pointer too. */
    void *(*raw_alloc)(int device_index, size_t nbytes);
    void (*raw_free)(int device_index, void *ptr, size_t nbytes);
    /* The device memory the backend keeps for itself on a device (NULL or 0: none), and
     * the block the allocator reserved for it, once per device, at the device's first
     * allocation (tensor/alloc.c counts it as workspace). */
    size_t (*workspace_bytes)(int device_index);
    void (*adopt_workspace)(int device_index, void *ptr, size_t nbytes);
    /* Free and total bytes of the device, as its driver sees them (cudaMemGetInfo). */
    void (*memory_info)(int device_index, size_t *free_bytes, size_t *total_bytes);
    /* Waits for the queued work that writes src, then copies (call through
     * gc_device_copy_to_host, which counts it). */
    void (*memcpy_to_host)(void *host, const void *src, size_t nbytes);
    /* Returns once `host` may be reused, without waiting for queued work where it can. */
    void (*memcpy_from_host)(void *dst, const void *host, size_t nbytes);
    void (*memcpy_same_device)(void *dst, const void *src, size_t nbytes);
    void (*synchronize)(int device_index);

    /* --- kernels (n = number of elements) --- */
    void (*fill)(void *dst, size_t n, gc_dtype dtype, double value);
    /* dst[i] = start + i * step */
    void (*arange)(void *dst, size_t n, gc_dtype dtype, double start, double step);
    /* See gradcache/random.h: a = lo or mean, b = hi or std. */
    void (*random)(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                   uint64_t offset, double a, double b);
    void (*cast)(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n);
    void (*unary)(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype);
    /* dx = g * derivative(x) elementwise, derivative being GC_UNARY_RELU_GRAD,
     * GC_UNARY_GELU_TANH_GRAD or GC_UNARY_GELU_ERF_GRAD, for f32 and f64: one pass where a
     * backward would write the derivative and then multiply, with the same bits. Optional
     * (NULL on CUDA, where the rule composes the two). */
    void (*unary_grad)(gc_unary_op derivative, const void *x, const void *g, void *dx, size_t n, gc_dtype dtype);
    void (*binary)(gc_binary_op op, const void *a, const void *b, void *out,
                   const gc_broadcast *bc, gc_dtype dtype);
    /* out = a op s, or s op a when scalar_first */
    void (*binary_scalar)(gc_binary_op op, const void *a, double s, bool scalar_first,
                          void *out, size_t n, gc_dtype dtype);
    void (*matmul)(const gc_matmul_args *args);
    /* x [rows, cols] -> out [rows]; for MAX, argmax (may be NULL) gets the first index. */
    void (*reduce_last)(gc_reduce_op op, const void *x, void *out, int32_t *argmax,
                        size_t rows, size_t cols, gc_dtype dtype);
    /* x [outer, mid, inner] -> out [outer, inner], summed over mid as reduce_last sums a row.
     * Optional (NULL on CUDA, where moving mid last with a permute runs at memory bandwidth
     * and reduce_last's blocks fill the device, which one thread per column would not). */
    void (*sum_middle)(const void *x, void *out, size_t outer, size_t mid, size_t inner, gc_dtype dtype);
    /* x, y [rows, cols]; log selects log-softmax. */
    void (*softmax_last)(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype,
                         bool log);
    /* x, y [rows, cols]; gamma, beta [cols] or NULL; mean, rstd f32 [rows] or NULL. */
    void (*layernorm)(const void *x, const void *gamma, const void *beta, void *y,
                      float *mean, float *rstd, size_t rows, size_t cols, double eps,
                      gc_dtype dtype);
    /* The input gradient of layernorm: x, g, dx [rows, cols] of a working dtype (f32, f64);
     * gamma [cols] or NULL; dx NULL when not wanted; g_xhat [rows, cols] or NULL gets
     * g (x - mean) rstd, whose column sums are gamma's gradient. Optional (NULL on CUDA, where
     * the rule composes it from ops). */
    void (*layernorm_backward)(const void *x, const void *gamma, const void *g, void *dx, void *g_xhat,
                               size_t rows, size_t cols, double eps, gc_dtype dtype);
    /* index [n]: stops the program naming the first index outside [0, site->bound) (see
     * gc_index_site_fail). The CPU stops at once; a GPU checks without a round trip to the
     * host and reports at the device's next synchronisation (or at once under
     * GC_CUDA_SYNC=1). Checking never slows a valid run down by a host wait. */
    void (*check_index)(const int32_t *index, size_t n, const gc_index_site *site);
    /* table [vocab, dim], ids [n_ids] -> out [n_ids, dim]. The ids were given to
     * check_index first; a row whose id is outside [0, vocab) is zeroed (never read out
     * of bounds) until that check stops the program. */
    void (*embedding)(const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab,
                      size_t dim, gc_dtype dtype);
    void (*permute)(const void *x, void *y, const gc_permute_args *args, size_t elem_size);

    /* --- scatters, for backward rules (float dtypes; out is zero-filled by the caller) --- */
    /* src [rows], index [rows] -> out [rows, cols]: out[r, index[r]] = src[r]. */
    void (*scatter_last)(const void *src, const int32_t *index, void *out, size_t rows, size_t cols,
                         gc_dtype dtype);
    /* grad_out [n_ids, dim] of `dtype`, ids [n_ids] -> grad_table [vocab, dim] of dtype's
     * working dtype (f32 for f16 and bf16: a row shared by many ids is summed in f32, then
     * rounded once by the caller): row ids[i] += row i. The forward checked the ids
     * (check_index), but on CUDA that check is reported only at the next synchronisation,
     * which may come after this backward was queued: an id outside [0, vocab) adds nothing
     * (never a write out of bounds). */
    void (*embedding_backward)(const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids,
                               size_t vocab, size_t dim, gc_dtype dtype);

    /* --- dropout: x, y [n]; y[i] = x[i] * scale when (word(offset + i) >> 8) >= threshold,
     * else 0, word() the Philox stream of seed (gradcache/random.h) --- */
    void (*dropout)(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale,
                    uint64_t seed, uint64_t offset);

    /* --- the tiled contrastive loss (gc_score_tile_args above) --- */
    /* Overwrites scores with the scores s, then folds each row (and column) into its running
     * log-sum-exp and picks the target scores. */
    void (*score_tile_lse)(const gc_score_tile_args *args);
    /* Overwrites scores (the dot products, recomputed) with d loss / d dot products:
     * d loss / d s_ij times row_scale[i] col_scale[j]. */
    void (*score_tile_grad)(const gc_score_tile_args *args);

    /* --- fused optimizer updates, in place; param and grad [n] of dtype, state f32 [n] ---
     * g is grad_scale times the stored gradient. master (f32 [n], or NULL) is the f32 master
     * copy of an f16 or bf16 parameter: when given, p is read from it, the new p is stored
     * into it and then rounded into param, in the same pass. */
    /* g' = g + weight_decay p; buf = first_step ? g' : momentum buf + g'; p -= lr buf
     * (momentum 0: p -= lr g', buf unused and may be NULL). */
    void (*sgd_update)(void *param, float *master, const void *grad, float *momentum_buffer, size_t n,
                       gc_dtype dtype, const gc_sgd_hyper *hyper);
    /* p -= lr weight_decay p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
     * p -= lr (m / bc1) / (sqrt(v / bc2) + eps) */
    void (*adamw_update)(void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq,
                         size_t n, gc_dtype dtype, const gc_adamw_hyper *hyper);

    /* --- finiteness of many arrays in one pass: sets *flag (an i32 in device memory) to 1
     * when any element of any of the `count` spans (floating dtypes; the array of spans is in
     * host memory) is inf or nan, and leaves it unchanged otherwise --- */
    void (*nonfinite_check)(const gc_span *spans, int count, int32_t *flag);
} gc_backend;

/* The backend owning `device`; stops the program when it is not built. */
const gc_backend *gc_backend_for(gc_device device);

/* Every copy from a device to the host goes through this: it counts the copy (see
 * gc_device_get_sync_stats) and calls the backend's memcpy_to_host. */
void gc_device_copy_to_host(gc_device device, void *host, const void *src, size_t nbytes);
/* Counts a wait for a device that the library makes on its own (gc_device_synchronize and
 * gc_device_copy_to_host count theirs). */
void gc_device_count_synchronization(gc_device device);

/* Stops the program naming the bad index (see gc_index_site): position is where it is in
 * the index tensor (a lower bound when `at_least`), value the index; note, when not
 * NULL, is appended in parentheses. */
__attribute__((noreturn)) void gc_index_site_fail(const gc_index_site *site, int64_t position, bool at_least,
                                                  int32_t value, const char *note);

extern const gc_backend gc_cpu_backend;
#ifdef GC_HAVE_CUDA
extern const gc_backend gc_cuda_backend;
#endif

#ifdef __cplusplus
}
#endif
#endif
