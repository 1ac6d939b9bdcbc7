/* Tensor ops (forward only). Same semantics on the CPU and on CUDA: an op runs on the
 * device of its inputs, which must all be on one device. Every op returns a new tensor
 * (a new reference) or NULL on a recoverable error (see error.h); a NULL input makes
 * the op return NULL. Shape, dtype and device mismatches stop the program naming the
 * op and the shapes.
 *
 * Floating-point work on f16/bf16 is done in f32 and rounded once when stored. */
#ifndef GRADCACHE_OPS_H
#define GRADCACHE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- elementwise, binary ----------------------------------------------------------
 * Broadcasting follows NumPy: shapes are aligned on the right and a dimension of size
 * 1 (or a missing leading one) is repeated. So a [D] bias adds over a [B, D] batch, a
 * [B, 1] column divides each row, a [B, 1, 1, T] mask adds over [B, H, T, T] scores.
 * Both inputs have one dtype; i32 is allowed for add, sub and mul. */
gc_tensor *gc_add(const gc_tensor *a, const gc_tensor *b);
gc_tensor *gc_sub(const gc_tensor *a, const gc_tensor *b);
gc_tensor *gc_mul(const gc_tensor *a, const gc_tensor *b);
gc_tensor *gc_div(const gc_tensor *a, const gc_tensor *b);

/* Broadcasts x to `shape` (NumPy rules): a new contiguous tensor. */
gc_tensor *gc_expand(const gc_tensor *x, int ndim, const int64_t *shape);
/* The inverse of broadcasting: sums x over the dims that broadcasting x from `shape` would
 * have repeated, giving a tensor of `shape` (the gradient of a broadcast input). */
gc_tensor *gc_sum_to_shape(const gc_tensor *x, int ndim, const int64_t *shape);
/* dst += src in place (same shape, dtype, device); not recorded by autograd. Returns GC_OK
 * (it allocates nothing, so it cannot fail otherwise). */
gc_status gc_add_inplace(gc_tensor *dst, const gc_tensor *src);
/* x *= s in place (floating dtypes; f16 and bf16 computed in f32, as gc_mul_scalar); not
 * recorded by autograd; a NULL x is a no-op. For gradient clipping, which rescales gradients
 * without a copy. */
void gc_scale_inplace(gc_tensor *x, double s);

/* Whether any element of the `count` tensors (count >= 1; floating dtypes, all on one
 * device) is an inf or a nan: a 0-dim i32 tensor on their device holding 1 or 0. One pass
 * over all of them (one kernel launch for up to 512 tensors on CUDA, not one per tensor), and
 * the verdict stays on the device until read, so that it can be combined across processes
 * first. Not recorded by autograd. For a loss scaler's check of every gradient. */
gc_tensor *gc_any_nonfinite(gc_tensor *const *tensors, int count);

/* --- with a scalar (a op s, or s op a for the r-versions) --- */
gc_tensor *gc_add_scalar(const gc_tensor *a, double s);
gc_tensor *gc_mul_scalar(const gc_tensor *a, double s);
gc_tensor *gc_sub_scalar(const gc_tensor *a, double s);  /* a - s */
gc_tensor *gc_rsub_scalar(const gc_tensor *a, double s); /* s - a */
gc_tensor *gc_div_scalar(const gc_tensor *a, double s);  /* a / s */
gc_tensor *gc_rdiv_scalar(const gc_tensor *a, double s); /* s / a */

/* --- elementwise, unary (floating-point dtypes) --- */
gc_tensor *gc_neg(const gc_tensor *x);
gc_tensor *gc_exp(const gc_tensor *x);
gc_tensor *gc_log(const gc_tensor *x);
gc_tensor *gc_tanh(const gc_tensor *x);
gc_tensor *gc_relu(const gc_tensor *x);
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as in GPT-2 and BERT's TF port. */
gc_tensor *gc_gelu_tanh(const gc_tensor *x);
/* x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), as in BERT and PyTorch's default. */
gc_tensor *gc_gelu_erf(const gc_tensor *x);
gc_tensor *gc_sqrt(const gc_tensor *x);
gc_tensor *gc_rsqrt(const gc_tensor *x);

/* --- matmul ---
 * 2-D: op(a) [M, K] @ op(b) [K, N] -> [M, N], where op(a) = a or a^T as trans_a says
 * (so a is stored [M, K], or [K, M] when trans_a). 3-D: the same for each of B
 * batches, a [B, ., .] and b [B, ., .]. Floating dtypes; accumulation in f32 (f64 for
 * f64). CUDA uses cuBLAS (tensor cores for f16/bf16; f32 stays full-precision f32). */
gc_tensor *gc_matmul(const gc_tensor *a, const gc_tensor *b, bool trans_a, bool trans_b);
/* 2-D op(a) @ op(b) + bias, bias [N] added to every row (a linear layer): the bias rows are
 * written into the result and the GEMM adds the product to them, one pass over the result
 * fewer than gc_add after gc_matmul. The sum may round differently from that pair's (the
 * GEMM may add the bias before the last of its partial sums), within the GEMM's own error. */
gc_tensor *gc_matmul_bias(const gc_tensor *a, const gc_tensor *b, const gc_tensor *bias, bool trans_a, bool trans_b);

/* --- reductions over the last dim (keepdim keeps it as size 1) and over everything --- */
gc_tensor *gc_sum_last(const gc_tensor *x, bool keepdim);
gc_tensor *gc_mean_last(const gc_tensor *x, bool keepdim);
/* argmax, when not NULL, receives an i32 tensor of the same shape as the result holding
 * the index of the first maximum. */
gc_tensor *gc_max_last(const gc_tensor *x, bool keepdim, gc_tensor **argmax);
gc_tensor *gc_sum_all(const gc_tensor *x);  /* 0-dim */
gc_tensor *gc_mean_all(const gc_tensor *x); /* 0-dim */
gc_tensor *gc_max_all(const gc_tensor *x);  /* 0-dim */

/* --- normalisation over the last dim --- */
gc_tensor *gc_softmax(const gc_tensor *x);
gc_tensor *gc_log_softmax(const gc_tensor *x);
/* softmax(scale x + bias) over the last dim, in one pass: attention's scaled, masked softmax.
 * x [B, H, Q, C]; bias [B or 1, 1, Q or 1, C] of x's dtype and device (broadcast over the
 * heads, and over the batch or the queries where its dim is 1), or NULL. The bias is a
 * constant (a mask): it gets no gradient, and a backward that needs one stops. */
gc_tensor *gc_softmax_scaled(const gc_tensor *x, double scale, const gc_tensor *bias);
/* (x - mean) / sqrt(var + eps) * gamma + beta over the last dim [D] (biased variance, as
 * in PyTorch). gamma and beta ([D], x's dtype) may be NULL (1 and 0). When mean and
 * rstd are not NULL they receive f32 tensors of x's leading shape, the saved statistics
 * a backward pass needs. */
gc_tensor *gc_layernorm(const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *beta,
                        double eps, gc_tensor **mean, gc_tensor **rstd);

/* --- the decoder family's ops (Llama, Mistral, Qwen) --- */
/* x / sqrt(mean(x^2) + eps) * weight over the last dim [D] (RMSNorm: no centring, no shift);
 * weight [D] of x's dtype, or NULL (1). */
gc_tensor *gc_rmsnorm(const gc_tensor *x, const gc_tensor *weight, double eps);
/* Rotary position embeddings: x [B, T, H, Dh] (Dh even; a head's element i paired with
 * element i + Dh/2) rotated, pair i of position t by the angle whose cosine and sine are
 * table[t, i] and table[t, Dh/2 + i]; table [T, Dh] of x's working dtype (gc_rope_table). */
gc_tensor *gc_rope(const gc_tensor *x, const gc_tensor *table);
/* The table of gc_rope for positions 0 .. length - 1: angle t / (theta^(2i / head_dim) scale)
 * for i < head_dim / 2 (scale: linear position scaling, 1 for none), as a model of `dtype`
 * computes it: in double for f64, else as transformers does (each angle rounded to f32), in
 * dtype's working dtype, on `device`. Computed on the host: length x head_dim cosines and
 * sines, a cost far below a layer's. */
gc_tensor *gc_rope_table(int64_t length, int64_t head_dim, double theta, double scale, gc_dtype dtype,
                         gc_device device);
/* silu(gate) * up elementwise, silu(x) = x / (1 + e^-x): the gated product of a SwiGLU MLP.
 * gate and up of one shape, dtype and device. */
gc_tensor *gc_swiglu(const gc_tensor *gate, const gc_tensor *up);

/* --- dropout ---
 * y = x * keep / (1 - p), where element i is kept when (word(offset + i) >> 8) >= p 2^24,
 * word() being the Philox stream of `seed` (gradcache/random.h): numel(x) words, the same
 * mask on every device. 0 <= p < 1. The backward pass regenerates the mask from (seed,
 * offset) instead of keeping it. The nn layer's gc_nn_dropout() takes (seed, offset) from
 * the device's default generator. */
gc_tensor *gc_dropout(const gc_tensor *x, double p, uint64_t seed, uint64_t offset);
/* x [N, D] dropped as rows positions[0..N) (i32 [N], x's device) of a [*, D] tensor would be
 * by gc_dropout(..., seed, offset): row n's mask is words offset + positions[n] D + [0, D).
 * So a padded batch's real tokens, packed, draw the masks they draw in the padded layout. */
gc_tensor *gc_dropout_rows(const gc_tensor *x, const gc_tensor *positions, double p, uint64_t seed, uint64_t offset);

/* --- fused attention ---
 * softmax(scale q k^T + bias) v per head, dropout on the probabilities, computed tile by tile
 * (FlashAttention's online softmax): no [B, H, T, T] tensor in the forward or the backward.
 * The semantics are those of the unfused ops (matmul, gc_softmax_scaled, gc_dropout, matmul):
 *  - hiding is additive: -10000 on each key the causal mask or the window hides, added to the
 *    bias (which holds -10000 on padding), so a row with every key hidden is a uniform
 *    softmax exactly as there;
 *  - window > 0 hides keys k with q - k >= window (with causal too: q - window < k <= q, as
 *    transformers' Mistral sliding_window); without causal also those with k - q >= window;
 *  - grouped-query attention: query head h uses key/value head h / (H / KVH);
 *  - dropout p draws probability (b, h, i, j) from word offset + ((b H + h) T + i) T + j of
 *    seed's Philox stream, the word gc_dropout would read for the [B, H, T, T] probabilities:
 *    the same mask, so a replayed RNG context reproduces it.
 * q [B, H, T, Dh]; k, v [B, KVH, T, Dh] with KVH dividing H; bias [B or 1, 1, T or 1, T] of
 * q's dtype (a constant mask, no gradient) or NULL; every tensor of one float dtype and
 * device. 16-bit inputs are computed in f32. -> the context [B, H, T, Dh]. */
typedef struct gc_attention_fused_options {
    double scale;          /* multiplies q k^T (attention's 1 / sqrt(Dh)) */
    bool causal;           /* hide the keys after each query */
    int64_t window;        /* 0: none; else the sliding window above */
    double dropout;        /* p in [0, 1): on the probabilities */
    uint64_t seed, offset; /* the dropout mask's Philox stream and first word */
} gc_attention_fused_options;
gc_tensor *gc_attention_fused(const gc_tensor *q, const gc_tensor *k, const gc_tensor *v, const gc_tensor *bias,
                              const gc_attention_fused_options *options);

/* Attention over packed tokens, for inference: the context of texts whose real tokens are
 * packed as rows (the text encoder's packing), computed without unpacking them. Text b's
 * tokens are the rows whose positions (i32 [N], in host memory, increasing; NULL: every place
 * is a row, N = B T) lie in [b T, (b + 1) T); each attends to its own text's tokens with
 * softmax(scale q k^T + bias), bias [B, 1, 1, T] (q's dtype; its text's row at each key's
 * place) or NULL. Head h reads
 * key/value head h / (H / KVH). q [N, H * Dh]; k, v [N, KVH * Dh] -> [N, H * Dh], bit for bit
 * the rows of the composed ops' context of the unpacked batch (matmul on the CPU's own GEMM,
 * gc_softmax_scaled, matmul). No dropout and no backward: a graph that would record it stops
 * the program. Only where gc_attention_packed_available(q): f32 on the CPU (not under
 * GC_COMPOSED_OPS=1, which runs the paths a GPU takes). */
typedef struct gc_attention_packed_shape {
    int64_t batch, length;         /* B texts padded to T tokens */
    int64_t heads, kv_heads, head_dim;
    double scale;                  /* multiplies q k^T (attention's 1 / sqrt(Dh)) */
} gc_attention_packed_shape;
bool gc_attention_packed_available(const gc_tensor *q);
gc_tensor *gc_attention_packed(const gc_tensor *q, const gc_tensor *k, const gc_tensor *v, const gc_tensor *positions,
                               const gc_tensor *bias, const gc_attention_packed_shape *shape);

/* --- gather and layout --- */
/* table [V, D], ids i32 of any shape S -> [S..., D]. An id outside [0, V) is a
 * programmer error, reported at once on the CPU and, on a GPU, which checks the ids without
 * waiting for them, at the device's next synchronisation (at once with GC_CUDA_SYNC=1). */
gc_tensor *gc_embedding(const gc_tensor *table, const gc_tensor *ids);
/* Reorders the dims: result shape[i] = x shape[perm[i]]. A contiguous copy. */
gc_tensor *gc_permute(const gc_tensor *x, const int *perm);
/* Swaps two dims (negative dims count from the end). A contiguous copy. */
gc_tensor *gc_transpose(const gc_tensor *x, int dim0, int dim1);
/* Concatenates along dim 0; every other dim, the dtype and the device must match. */
gc_tensor *gc_cat0(gc_tensor *const *tensors, int count);
gc_tensor *gc_cast(const gc_tensor *x, gc_dtype dtype);
/* x in its working dtype (gc_working_dtype): an f16 or bf16 x cast to f32 (recorded, so its
 * gradient comes back in x's dtype), any other x itself (a new reference). How a loss or a
 * statistic is computed in f32 whatever the storage type. */
gc_tensor *gc_to_working(const gc_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
