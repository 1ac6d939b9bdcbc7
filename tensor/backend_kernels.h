/* The kernels of a backend, listed once. Each entry is X(name, (parameters)), a kernel that
 * returns nothing; backend.h makes the fields of gc_backend from the list, kernels_cpu.h and
 * kernels_cuda.h the prototypes of gc_cpu_<name> and gc_cuda_<name>, and backend_cpu.c and
 * backend_cuda.c the entries of their tables, so that no backend's list can drift from
 * another's.
 *
 * Every backend has the kernels of GC_KERNELS. Those of GC_FUSED_KERNELS are optional: one
 * pass where the composition of other kernels would take several, which the CPU has and
 * CUDA does not (a CUDA op composes them, deciding so in the tensor layer:
 * op_norm_backward.c). GC_COMPOSED_OPS=1 gives the CPU the table without them, so that the
 * CPU suite runs the paths a GPU takes (tensor/device.c).
 *
 * n is a number of elements; arrays are raw device memory, contiguous, of `dtype` unless said
 * otherwise. Kernels see no tensors and check no shapes: the op front-end (tensor/op_*.c)
 * checked everything and allocated every output first (backend.h says what memory a kernel
 * takes itself). */
#ifndef GC_TENSOR_BACKEND_KERNELS_H
#define GC_TENSOR_BACKEND_KERNELS_H

#define GC_KERNELS(X)                                                                                               \
    X(fill, (void *dst, size_t n, gc_dtype dtype, double value))                                                    \
    /* dst[i] = start + i * step */                                                                                 \
    X(arange, (void *dst, size_t n, gc_dtype dtype, double start, double step))                                     \
    /* See gradcache/random.h: a = lo or mean, b = hi or std. */                                                    \
    X(random, (void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed, uint64_t offset, double a,  \
               double b))                                                                                           \
    X(cast, (const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n))                         \
    X(unary, (gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype))                                    \
    /* dx = g * derivative(x) elementwise, derivative being GC_UNARY_RELU_GRAD,                                     \
     * GC_UNARY_GELU_TANH_GRAD or GC_UNARY_GELU_ERF_GRAD, for f32 and f64: one pass where a                        \
     * backward would write the derivative and then multiply, with the same bits. */                                \
    X(unary_grad, (gc_unary_op derivative, const void *x, const void *g, void *dx, size_t n, gc_dtype dtype))        \
    X(binary, (gc_binary_op op, const void *a, const void *b, void *out, const gc_broadcast *bc, gc_dtype dtype))    \
    /* out = a op s, or s op a when scalar_first */                                                                 \
    X(binary_scalar, (gc_binary_op op, const void *a, double s, bool scalar_first, void *out, size_t n,             \
                      gc_dtype dtype))                                                                              \
    X(matmul, (const gc_matmul_args *args))                                                                         \
    /* x [rows, cols] -> out [rows]; for MAX, argmax (may be NULL) gets the first index. */                         \
    X(reduce_last, (gc_reduce_op op, const void *x, void *out, int32_t *argmax, size_t rows, size_t cols,           \
                    gc_dtype dtype))                                                                                \
    /* x [outer, mid, inner] -> out [outer, inner], summed over mid as reduce_last sums a row                       \
     * (sum_to_shape's bias gradients, without moving mid last by a transposing copy). */                           \
    X(sum_middle, (const void *x, void *out, size_t outer, size_t mid, size_t inner, gc_dtype dtype))               \
    /* x, y [rows, cols] (y may be x); log selects log-softmax. Softmax of scale x + bias per row                  \
     * (bias NULL: none; op_params.h says which bias row a row adds); log-softmax has scale 1, no bias. */          \
    X(softmax_last, (const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype, bool log, double scale,      \
                     const gc_softmax_bias *bias))                                                                  \
    /* x, y [rows, cols]; gamma, beta [cols] or NULL; mean, rstd f32 [rows] or NULL. */                             \
    X(layernorm, (const void *x, const void *gamma, const void *beta, void *y, float *mean, float *rstd, size_t rows, \
                  size_t cols, double eps, gc_dtype dtype))                                                         \
    /* RMSNorm over the last dim (tensor/rmsnorm_impl.h): y = x rstd w per row of x [rows, cols],                  \
     * rstd = 1 / sqrt(mean(x^2) + eps); weight [cols] or NULL (1). */                                              \
    X(rmsnorm, (const void *x, const void *weight, void *y, size_t rows, size_t cols, double eps, gc_dtype dtype))  \
    /* Its gradients from x, g [rows, cols] and weight [cols] (or NULL), each optional (NULL: not                  \
     * wanted): dx [rows, cols] of dtype, and g_xhat [rows, cols] of dtype's working dtype (f32                   \
     * for f16 and bf16) = g x rstd, whose column sums are the weight's gradient. */                                \
    X(rmsnorm_backward, (const void *x, const void *weight, const void *g, void *dx, void *g_xhat, size_t rows,     \
                         size_t cols, double eps, gc_dtype dtype))                                                  \
    /* Rotary positions (tensor/rope_impl.h): x, y [rows, heads, head_dim], row r at position                      \
     * r mod length; table [length, head_dim] of dtype's working dtype, the cosines of each                         \
     * position's head_dim / 2 angles then their sines; inverse rotates back (the backward). */                     \
    X(rope, (const void *x, const void *table, void *y, size_t rows, size_t length, size_t heads, size_t head_dim,  \
             bool inverse, gc_dtype dtype))                                                                          \
    /* SwiGLU's gated product (tensor/swiglu_impl.h): out [n] = silu(gate) up. */                                   \
    X(swiglu, (const void *gate, const void *up, void *out, size_t n, gc_dtype dtype))                              \
    /* Its gradients from g [n]: d_gate, d_up [n] (either NULL when not wanted). */                                 \
    X(swiglu_backward, (const void *gate, const void *up, const void *g, void *d_gate, void *d_up, size_t n,        \
                        gc_dtype dtype))                                                                            \
    /* index [n]: stops the program naming the first index outside [0, site->bound) (see                            \
     * gc_index_site_fail). The CPU stops at once; a GPU checks without a round trip to the                        \
     * host and reports at the device's next synchronisation (or at once under                                     \
     * GC_CUDA_SYNC=1). Checking never slows a valid run down by a host wait. */                                    \
    X(check_index, (const int32_t *index, size_t n, const gc_index_site *site))                                     \
    /* table [vocab, dim], ids [n_ids] -> out [n_ids, dim]. The ids were given to                                  \
     * check_index first; a row whose id is outside [0, vocab) is zeroed (never read out of                        \
     * bounds) until that check stops the program. */                                                               \
    X(embedding, (const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab, size_t dim,         \
                  gc_dtype dtype))                                                                                  \
    X(permute, (const void *x, void *y, const gc_permute_args *args, size_t elem_size))                             \
    /* The scatters of backward rules (float dtypes; out is zero-filled by the caller).                             \
     * src [rows], index [rows] -> out [rows, cols]: out[r, index[r]] = src[r]. */                                  \
    X(scatter_last, (const void *src, const int32_t *index, void *out, size_t rows, size_t cols, gc_dtype dtype))   \
    /* grad_out [n_ids, dim] of `dtype`, ids [n_ids] -> grad_table [vocab, dim] of dtype's                          \
     * working dtype (f32 for f16 and bf16: a row shared by many ids is summed in f32, then                        \
     * rounded once by the caller): row ids[i] += row i. The forward checked the ids                                \
     * (check_index), but on CUDA that check is reported only at the next synchronisation,                          \
     * which may come after this backward was queued: an id outside [0, vocab) adds nothing                        \
     * (never a write out of bounds). */                                                                            \
    X(embedding_backward, (const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids, size_t vocab,  \
                           size_t dim, gc_dtype dtype))                                                             \
    /* x, y [n]; y[i] = x[i] * scale when (word(offset + i) >> 8) >= threshold, else 0, word()                      \
     * the Philox stream of seed (gradcache/random.h). */                                                           \
    X(dropout, (const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,  \
                uint64_t offset))                                                                                   \
    /* x, y [rows, cols]; row r dropped as row positions[r] (i32 [rows]) of a [*, cols] tensor:                    \
     * y[r, j] from word offset + positions[r] cols + j (modulo 2^64, so any position is defined). */              \
    X(dropout_rows, (const void *x, void *y, size_t rows, size_t cols, const int32_t *positions, gc_dtype dtype,    \
                     uint32_t threshold, double scale, uint64_t seed, uint64_t offset))                             \
    /* The tiled contrastive loss (gc_score_tile_args): overwrites scores with the scores s,                        \
     * then folds each row (and column) into its running log-sum-exp and picks the target                          \
     * scores. */                                                                                                   \
    X(score_tile_lse, (const gc_score_tile_args *args))                                                             \
    /* Overwrites scores (the dot products, recomputed) with d loss / d dot products:                               \
     * d loss / d s_ij times row_scale[i] col_scale[j]. */                                                          \
    X(score_tile_grad, (const gc_score_tile_args *args))                                                            \
    /* Fused attention (gc_attention_args): the context and each row's log-sum-exp, then                            \
     * (backward) the gradients of q, k and v, recomputing the probabilities from it. */                            \
    X(attention_forward, (const gc_attention_args *args))                                                           \
    X(attention_backward, (const gc_attention_args *args))                                                          \
    /* The fused optimizer updates, in place; param and grad [n] of dtype, state f32 [n]. g is                      \
     * grad_scale times the stored gradient. master (f32 [n], or NULL) is the f32 master copy                      \
     * of an f16 or bf16 parameter: when given, p is read from it, the new p is stored into it                      \
     * and then rounded into param, in the same pass.                                                               \
     * SGD: g' = g + weight_decay p; buf = first_step ? g' : momentum buf + g'; p -= lr buf                         \
     * (momentum 0: p -= lr g', buf unused and may be NULL). */                                                     \
    X(sgd_update, (void *param, float *master, const void *grad, float *momentum_buffer, size_t n, gc_dtype dtype,  \
                   const gc_sgd_hyper *hyper))                                                                      \
    /* AdamW: p -= lr weight_decay p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;                               \
     * p -= lr (m / bc1) / (sqrt(v / bc2) + eps) */                                                                 \
    X(adamw_update, (void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n,     \
                     gc_dtype dtype, const gc_adamw_hyper *hyper))                                                  \
    /* Finiteness of many arrays in one pass: sets *flag (an i32 in device memory) to 1 when                        \
     * any element of any of the `count` spans (floating dtypes; the array of spans is in host                     \
     * memory) is inf or nan, and leaves it unchanged otherwise. */                                                 \
    X(nonfinite_check, (const gc_span *spans, int count, int32_t *flag))

#define GC_FUSED_KERNELS(X)                                                                                         \
    /* The input gradient of layernorm: x, g, dx [rows, cols] of a working dtype (f32, f64);                        \
     * gamma [cols] or NULL; dx NULL when not wanted; g_xhat [rows, cols] or NULL gets                              \
     * g (x - mean) rstd, whose column sums are gamma's gradient. */                                                \
    X(layernorm_backward, (const void *x, const void *gamma, const void *g, void *dx, void *g_xhat, size_t rows,    \
                           size_t cols, double eps, gc_dtype dtype))                                                \
    /* The input gradient of a softmax of scale x + bias from its output y and g [rows, cols] of                    \
     * a working dtype (f32, f64): dx = scale y (g - sum(g y)), one pass per row, each                              \
     * intermediate rounded as the composed ops (mul, sum_last, sub, mul, mul_scalar) round it. */                  \
    X(softmax_backward, (const void *y, const void *g, void *dx, size_t rows, size_t cols, double scale,            \
                         gc_dtype dtype))                                                                           \
    /* Attention over packed tokens (gc_attention_packed_args): out, bit for bit the composed                       \
     * ops' context of the unpacked batch (on the CPU's own GEMM, softmax_scaled), without                          \
     * unpacking, permuting or packing anything. */                                                                 \
    X(attention_packed, (const gc_attention_packed_args *args))

/* Packing a weight once for many products (tensor/packed.c): a backend whose GEMM multiplies
 * packed panels of op(b) has both, the others neither (CUDA: cuBLAS takes op(b) as it lies).
 * pack_b_bytes: the bytes of op(b) packed for the product `args` describes (0: nothing worth
 * keeping); pack_b: op(b) packed into them, which the GEMM then takes as args->packed_b and
 * multiplies exactly as it multiplies the panels it packs itself. */
#define GC_PACKING_KERNELS(X)                                                                                       \
    X(pack_b_bytes, (const gc_matmul_args *args, size_t *bytes))                                                    \
    X(pack_b, (const gc_matmul_args *args, void *packed))

#endif
