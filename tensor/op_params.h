/* What an op hands its kernel besides arrays and sizes, named by the layers above too: which
 * unary, binary, reduction or random function it computes (autograd's records keep these),
 * and the hyper-parameters of the optimizer updates (nn's optimizers fill them in). The
 * kernels themselves, and the table that dispatches to them, are backend.h's: only the
 * tensor layer sees that. */
#ifndef GC_TENSOR_OP_PARAMS_H
#define GC_TENSOR_OP_PARAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "host_device.h"

typedef enum gc_unary_op {
    GC_UNARY_NEG,
    GC_UNARY_EXP,
    GC_UNARY_LOG,
    GC_UNARY_TANH,
    GC_UNARY_RELU,
    GC_UNARY_GELU_TANH,
    GC_UNARY_GELU_ERF,
    GC_UNARY_SQRT,
    GC_UNARY_RSQRT,
    /* derivatives, for backward rules: d relu/dx (1 where x > 0), d gelu/dx (both forms) */
    GC_UNARY_RELU_GRAD,
    GC_UNARY_GELU_TANH_GRAD,
    GC_UNARY_GELU_ERF_GRAD
} gc_unary_op;

typedef enum gc_binary_op { GC_BINARY_ADD, GC_BINARY_SUB, GC_BINARY_MUL, GC_BINARY_DIV } gc_binary_op;

typedef enum gc_reduce_op { GC_REDUCE_SUM, GC_REDUCE_MEAN, GC_REDUCE_MAX } gc_reduce_op;

typedef enum gc_random_kind { GC_RANDOM_UNIFORM, GC_RANDOM_NORMAL } gc_random_kind;

/* The additive bias of a scaled softmax (attention's mask, gc_softmax_scaled) as a kernel
 * reads it: x [B, H, Q, cols] is rows [B * H * Q, cols], and row r adds the bias row that
 * starts at element (r / rows_per_batch) * batch_stride + (r % queries) * query_stride of
 * `data` (x's dtype). A stride is 0 where the bias [1 or B, 1, 1 or Q, cols] broadcasts. */
typedef struct gc_softmax_bias {
    const void *data;
    size_t rows_per_batch; /* H * Q */
    size_t queries;        /* Q */
    size_t batch_stride;   /* Q * cols, or cols (bias [B, 1, 1, cols]), or 0 (bias [1, ...]) */
    size_t query_stride;   /* cols, or 0 (bias [..., 1, cols]) */
} gc_softmax_bias;

/* Where row `row`'s bias starts, in elements of `bias->data`. */
static inline GC_HD size_t gc_softmax_bias_offset(const gc_softmax_bias *bias, size_t row) {
    return row / bias->rows_per_batch * bias->batch_stride + row % bias->queries * bias->query_stride;
}

/* Hyper-parameters of the fused optimizer updates (see gradcache/optim.h). grad_scale
 * multiplies every gradient before it is used: a loss scaler's 1 / scale and a clipping
 * coefficient folded into the update (1 for a plain step). */
typedef struct gc_sgd_hyper {
    float lr, momentum, weight_decay, grad_scale;
    bool first_step; /* the momentum buffer starts as the first gradient (as in PyTorch) */
} gc_sgd_hyper;

typedef struct gc_adamw_hyper {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_correction1, bias_correction2; /* 1 - beta^step */
} gc_adamw_hyper;

#endif
