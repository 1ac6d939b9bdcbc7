/* Ops the library uses internally (backward rules) but that are not part of the public
 * API: derivative kernels and scatters. Not recorded by the op observer. */
#ifndef GC_TENSOR_OP_INTERNAL_H
#define GC_TENSOR_OP_INTERNAL_H

#include "backend.h"
#include "gradcache/tensor.h"

/* y = op(x) elementwise, including the derivative ops (GC_UNARY_*_GRAD). */
gc_tensor *gc_unary_apply(gc_unary_op op, const gc_tensor *x);
/* src [rows], index i32 [rows] -> [rows, cols]: out[r, index[r]] = src[r], zero elsewhere. */
gc_tensor *gc_scatter_last(const gc_tensor *src, const gc_tensor *index, int64_t cols);
/* grad_out [S..., D], ids i32 [S...] -> [vocab, D]: row v = sum of the grad_out rows whose id
 * is v (duplicate ids accumulate). */
gc_tensor *gc_embedding_backward(const gc_tensor *grad_out, const gc_tensor *ids, int64_t vocab);

#endif
