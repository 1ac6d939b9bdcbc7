/* What an op hands its kernel besides arrays and sizes, named by the layers above too: which
 * unary, binary, reduction or random function it computes (autograd's records keep these),
 * and the hyper-parameters of the optimizer updates (nn's optimizers fill them in). The
 * kernels themselves, and the table that dispatches to them, are backend.h's: only the
 * tensor layer sees that. */
#ifndef GC_TENSOR_OP_PARAMS_H
#define GC_TENSOR_OP_PARAMS_H

#include <stdbool.h>

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
