/* Ops the library uses internally (backward rules, the tiled contrastive loss) but that are
 * not part of the public API: derivative kernels, scatters, a GEMM into an existing tensor
 * and the contrastive loss's tiles. Not recorded by the op observer. */
#ifndef GC_TENSOR_OP_INTERNAL_H
#define GC_TENSOR_OP_INTERNAL_H

#include "op_params.h"
#include "gradcache/ops.h"
#include "gradcache/tensor.h"

/* y = op(x) elementwise, including the derivative ops (GC_UNARY_*_GRAD). */
gc_tensor *gc_unary_apply(gc_unary_op op, const gc_tensor *x);
/* g * derivative(x) elementwise, derivative being GC_UNARY_RELU_GRAD, GELU_TANH_GRAD or
 * GELU_ERF_GRAD (a unary op's backward, from its input x): the backend's fused unary_grad
 * for f32 and f64, else the derivative and then a multiply (the same bits in f32 and f64).
 * x and g of one shape, dtype and device. */
gc_tensor *gc_unary_grad(gc_unary_op derivative, const gc_tensor *x, const gc_tensor *g);
/* src [rows], index i32 [rows] -> [rows, cols]: out[r, index[r]] = src[r], zero elsewhere. */
gc_tensor *gc_scatter_last(const gc_tensor *src, const gc_tensor *index, int64_t cols);
/* grad_out [S..., D], ids i32 [S...] -> [vocab, D]: row v = sum of the grad_out rows whose id
 * is v (duplicate ids accumulate), summed in the working dtype (f32 for f16 and bf16) and
 * rounded once to grad_out's dtype. */
gc_tensor *gc_embedding_backward(const gc_tensor *grad_out, const gc_tensor *ids, int64_t vocab);

/* The input gradient of layernorm: x, g [..., cols] of one working dtype (f32, f64) on one
 * device, gamma [cols] or NULL. *dx gets the input gradient and *g_xhat the terms of gamma's
 * gradient, each of x's shape, for the pointers that are not NULL: the backend's fused
 * kernel where it has one, else composed of ops. False when out of memory, with nothing
 * kept and the error set. */
bool gc_layernorm_backward(const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *g, double eps,
                           gc_tensor **dx, gc_tensor **g_xhat);

/* The input gradient of a softmax (log: a log-softmax) of scale x + bias from its output y and
 * g [..., cols] of one working dtype (f32, f64) on one device: scale y (g - sum(g y)), or
 * scale (g - e^y sum(g)). The backend's fused kernel where it has one (a softmax's), else
 * composed of ops; the same bits either way. NULL when out of memory, the error set. */
gc_tensor *gc_softmax_backward(const gc_tensor *y, const gc_tensor *g, bool log, double scale);

/* The gradients of rmsnorm from x and g [..., cols] of one float dtype on one device and
 * weight [cols] or NULL, for the pointers that are not NULL: *dx of x's dtype, *g_xhat = g x
 * rstd of its working dtype (f32 for f16 and bf16), whose sums over rows are the weight's
 * gradient. False when out of memory, with nothing kept and the error set. */
bool gc_rmsnorm_backward(const gc_tensor *x, const gc_tensor *weight, const gc_tensor *g, double eps, gc_tensor **dx,
                         gc_tensor **g_xhat);
/* x rotated back by the angles of `table` (gc_rope's inverse, and so its backward: the
 * rotation is orthogonal). */
gc_tensor *gc_rope_inverse(const gc_tensor *x, const gc_tensor *table);
/* The gradients of swiglu from gate, up and g (one shape, dtype and device), for the pointers
 * that are not NULL. False when out of memory, with nothing kept and the error set. */
bool gc_swiglu_backward(const gc_tensor *gate, const gc_tensor *up, const gc_tensor *g, gc_tensor **d_gate,
                        gc_tensor **d_up);

/* What the backward of gc_attention_fused reads: its inputs (bias NULL when none), its
 * output and the rows' log-sum-exp [B, H, T] it kept, and its options. */
typedef struct gc_attention_fused_saved {
    const gc_tensor *q;    /* [B, H, T, Dh] */
    const gc_tensor *k;    /* [B, KVH, T, Dh] */
    const gc_tensor *v;    /* [B, KVH, T, Dh] */
    const gc_tensor *bias; /* [B or 1, 1, T or 1, T] or NULL */
    const gc_tensor *out;  /* [B, H, T, Dh] */
    const gc_tensor *lse;  /* [B, H, T] of the working dtype */
    const gc_attention_fused_options *options;
} gc_attention_fused_saved;
/* The gradients of gc_attention_fused from g [B, H, T, Dh] (FlashAttention-2: the
 * probabilities recomputed tile by tile, never a [B, H, T, T] tensor): *dq [B, H, T, Dh],
 * *dk and *dv [B, KVH, T, Dh] (summed over each key head's query heads), all three of the
 * working dtype (f32 for f16 and bf16), for the caller to round once. False when out of
 * memory, with nothing kept and the error set. */
bool gc_attention_fused_backward(const gc_attention_fused_saved *saved, const gc_tensor *g, gc_tensor **dq,
                                 gc_tensor **dk, gc_tensor **dv);

/* One fused optimizer update of param in place (see backend.h's sgd_update and adamw_update
 * for the arithmetic): master is param's f32 master copy (f16 and bf16 only) or NULL; the
 * states are f32 of param's shape on its device (the momentum buffer may be NULL when the
 * momentum is 0); grad is of param's shape, dtype and device. A mismatch stops the program. */
void gc_sgd_update_(gc_tensor *param, gc_tensor *master, const gc_tensor *grad, gc_tensor *momentum_buffer,
                    const gc_sgd_hyper *hyper);
void gc_adamw_update_(gc_tensor *param, gc_tensor *master, const gc_tensor *grad, gc_tensor *exp_avg,
                      gc_tensor *exp_avg_sq, const gc_adamw_hyper *hyper);

/* x broadcast (NumPy rules) into the existing contiguous `target`: gc_expand's copy, also
 * the bias rows gc_matmul_bias starts from. False when out of memory. */
bool gc_broadcast_into(const char *op, const gc_tensor *x, gc_tensor *target);

/* c = op(a) @ op(b), or c += op(a) @ op(b) when accumulate, into an existing c of the
 * product's shape (a view such as a slice of rows works: it is contiguous). For the tiled
 * contrastive loss, which accumulates gradients tile by tile without a temporary. */
void gc_matmul_into(gc_tensor *c, const gc_tensor *a, const gc_tensor *b, bool trans_a, bool trans_b,
                    bool accumulate);

/* One tile of the tiled contrastive loss, as tensors (gc_score_tile_args in backend.h says
 * what each is): one float dtype, f32 or f64, on one device. */
typedef struct gc_score_tile {
    gc_tensor *scores;          /* [rows, cols]: the dot products of the tile's queries and candidates */
    const gc_tensor *row_scale; /* [rows] */
    const gc_tensor *col_scale; /* [cols] */
    const gc_tensor *targets;   /* i32 [rows] */
    int64_t col_start;
    const gc_tensor *bias;      /* [rows, cols] or NULL */
} gc_score_tile;

/* The backend's score_tile_lse: row_max, row_sum, target_score [rows]; col_max and col_sum
 * [cols], or both NULL. */
void gc_score_tile_lse(const gc_score_tile *tile, gc_tensor *row_max, gc_tensor *row_sum, gc_tensor *col_max,
                       gc_tensor *col_sum, gc_tensor *target_score);
/* The backend's score_tile_grad: row_lse [rows]; col_lse and col_weight [cols], or both NULL. */
void gc_score_tile_grad(const gc_score_tile *tile, const gc_tensor *row_lse, double row_weight,
                        const gc_tensor *col_lse, const gc_tensor *col_weight, double target_weight);

#endif
