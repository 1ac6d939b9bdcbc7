/* The one dispatch point between the ops and the kernels, seen only by the tensor layer.
 *
 * An op (tensor/op_*.c) checks shapes, dtypes and devices, allocates its output, and
 * calls the kernel of the backend that owns the device: gc_backend_for(device)->kernel
 * (the kernels are listed in backend_kernels.h). Kernels see raw, contiguous arrays and
 * sizes only; they never allocate tensors and never check shapes. The one memory a kernel
 * takes itself is the CPU's per-thread scratch (packing buffers, kept between calls:
 * cpu/scratch_cpu.c), host memory outside the tensor accounting whose exhaustion stops the
 * program; CUDA kernels use the device's workspace, reserved with its first allocation. The
 * CPU backend (tensor/cpu/) is the readable reference; the CUDA backend (tensor/cuda/) has
 * the same semantics. */
#ifndef GC_TENSOR_BACKEND_H
#define GC_TENSOR_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/config.h"
#include "gradcache/device.h"
#include "gradcache/dtype.h"
#include "gradcache/tensor.h"
#include "backend_kernels.h"
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
    /* op(b) is a weight (gc_tensor_set_weight): the CPU multiplies it with its own GEMM, and
     * packed_b is op(b) already packed by the backend's pack_b for this product, or NULL (the
     * GEMM packs it itself, the same panels). */
    bool b_is_weight;
    const void *packed_b;
    /* NULL, or c's starting value as one row [n] for every row (a bias), read in place of c
     * (which then need not hold it): c = alpha op(a) op(b) + beta c_row, bit for bit what c
     * holding the row broadcast would give. Only the CPU backend takes it (op_matmul.c). */
    const void *c_row;
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
/* One tile of the tiled contrastive loss (nn/losses/contrastive_tiled.c): a block of queries
 * (rows) against a block of candidates (columns). `scores` holds the block's dot products
 * q_i . p_j, and the score of element (i, j) is s_ij = scores[i, j] row_scale[i] col_scale[j]
 * (the temperature and cosine's inverse norms are folded into the scales), plus bias[i, j]
 * when a bias is given. Every vector points
 * at the tile's own rows or columns; floats are of `dtype`, f32 or f64. The arithmetic is
 * tensor/score_tile_impl.h's, shared by every backend. */
typedef struct gc_score_tile_args {
    void *scores;                  /* [rows, cols]: overwritten (see the kernels) */
    const void *row_scale;         /* [rows] */
    const void *col_scale;         /* [cols] */
    const int32_t *targets;        /* [rows]: each row's positive, a column of the whole matrix */
    const void *bias;              /* [rows, cols] or NULL: added to each score (0, or -inf to mask
                                      a candidate out: the GIST loss's false negatives) */
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

/* Fused attention (gc_attention_fused; the arithmetic is tensor/attention_impl.h's, shared
 * by every backend). Row r = (b H + h) T + i is query i of head h of text b; head h reads
 * key/value head h / (H / KVH). The kernels see no [B, H, T, T] array: each row's logits
 * are recomputed a tile at a time. */
typedef struct gc_attention_args {
    const void *q;              /* [B, H, T, Dh] of dtype */
    const void *k, *v;          /* [B, KVH, T, Dh] of dtype */
    gc_softmax_bias bias;       /* over the [B, H, T, T] logits as softmax_scaled's; data NULL: none */
    int64_t batch, heads, kv_heads, length, head_dim;
    gc_dtype dtype;             /* f32, f64, f16 or bf16; the working dtype is f64 for f64, else f32 */
    double scale;
    bool causal;
    int64_t window;
    uint32_t threshold;         /* dropout's keep threshold (0: no dropout) */
    double keep_scale;          /* 1 / (1 - p) */
    uint64_t seed, offset;
    /* attention_forward writes out and lse; attention_backward reads them */
    void *out;                  /* [B, H, T, Dh] of dtype */
    void *lse;                  /* [B, H, T] of the working dtype: each row's log-sum-exp */
    /* attention_backward: from grad_out it writes row_dot = rowsum(grad_out o out), then the
     * gradients, all of the working dtype (dk and dv summed over a key head's query heads) */
    const void *grad_out;       /* [B, H, T, Dh] of dtype */
    void *row_dot;              /* [B, H, T] */
    void *dq;                   /* [B, H, T, Dh] */
    void *dk, *dv;              /* [B, KVH, T, Dh] */
} gc_attention_args;

/* Attention over packed tokens (gc_attention_packed): each text's real tokens are rows
 * [first, first + n) of q, k, v and out, and attend to each other only. Row r sits at place
 * positions[r] = b T + t of the padded [B, T] batch (increasing), so that text b's keys get
 * the bias of their padded places. Inference only: no dropout, no gradient. */
typedef struct gc_attention_packed_args {
    const void *q;             /* [N, H * Dh] of dtype */
    const void *k, *v;         /* [N, KVH * Dh]; head h reads key/value head h / (H / KVH) */
    const int32_t *positions;  /* [N]: each row's place b T + t, increasing (host memory); NULL:
                                * every place is a row (N = B T, nothing padded out) */
    const void *bias;          /* [B, T]: each text's additive bias on its keys, or NULL */
    int64_t tokens, batch, length, heads, kv_heads, head_dim;
    gc_dtype dtype;            /* f32 */
    double scale;              /* multiplies q k^T */
    void *out;                 /* [N, H * Dh] */
} gc_attention_packed_args;

typedef struct gc_backend {
    const char *name;

    /* --- memory (bytes; these never count: the allocator in tensor/alloc.c does) --- */
    /* NULL when the device is full; a request of 0 bytes gets a unique pointer too. */
    void *(*raw_alloc)(int device_index, size_t nbytes);
    void (*raw_free)(int device_index, void *ptr, size_t nbytes);
    /* Hands what raw_free freed but the backend's own allocator still keeps (malloc's heap)
     * back to the system; called after the allocator returns cached blocks. NULL: nothing kept. */
    void (*trim)(int device_index);
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

    /* --- the kernels (backend_kernels.h): optional ones (the fused, packing) are NULL where absent --- */
#define GC_KERNEL_FIELD(name, params) void(*name) params;
    GC_KERNELS(GC_KERNEL_FIELD)
    GC_FUSED_KERNELS(GC_KERNEL_FIELD)
    GC_PACKING_KERNELS(GC_KERNEL_FIELD)
#undef GC_KERNEL_FIELD
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
/* The CPU's table without its fused kernels: the paths a GPU takes (GC_COMPOSED_OPS=1). */
extern const gc_backend gc_cpu_composed_backend;
#ifdef GC_HAVE_CUDA
extern const gc_backend gc_cuda_backend;
#endif

#ifdef __cplusplus
}
#endif
#endif
