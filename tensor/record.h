/* The op observer: how a higher layer (autograd) learns that an op ran, without the
 * tensor layer knowing anything about gradients.
 *
 * Every op front-end that produces a tensor from tensors ends with gc_record_op(...). When
 * no observer is installed (a plain tensor program, or autograd's no-grad mode) that is one
 * predictable branch. The observer receives the op's kind, its inputs, its output and the
 * non-tensor parameters it was called with, which is everything a backward rule needs. */
#ifndef GC_TENSOR_RECORD_H
#define GC_TENSOR_RECORD_H

#include <stdbool.h>

#include "op_params.h"
#include "gradcache/ops.h"
#include "gradcache/tensor.h"

typedef enum gc_op_kind {
    GC_OP_BINARY,        /* add/sub/mul/div with broadcasting: params.binary */
    GC_OP_BINARY_SCALAR, /* params.scalar */
    GC_OP_UNARY,         /* params.unary */
    GC_OP_EXPAND,        /* broadcast to a shape: the output's shape */
    GC_OP_MATMUL,        /* params.matmul */
    GC_OP_REDUCE_LAST,   /* sum/mean/max over the last dim: params.reduce (argmax saved for max) */
    GC_OP_REDUCE_ALL,    /* sum/mean/max over everything: params.reduce */
    GC_OP_SUM_DIMS,      /* sum over the consecutive dims params.sum_dims (from sum_to_shape) */
    GC_OP_SOFTMAX,       /* inputs x, bias? (constant); params.softmax */
    GC_OP_LAYERNORM,     /* inputs x, gamma?, beta?; params.layernorm */
    GC_OP_EMBEDDING,     /* inputs table, ids */
    GC_OP_PERMUTE,       /* params.permute */
    GC_OP_SLICE0,        /* params.slice */
    GC_OP_RESHAPE,       /* no params: the input's shape is on the input */
    GC_OP_CAT0,          /* inputs: the tensors concatenated */
    GC_OP_CAST,          /* no params: the dtype is on the input */
    GC_OP_DROPOUT,       /* inputs x, positions? (gc_dropout_rows); params.dropout */
    GC_OP_RMSNORM,       /* inputs x, weight?; params.rmsnorm */
    GC_OP_ROPE,          /* inputs x, table (never differentiated: a function of positions) */
    GC_OP_SWIGLU,        /* inputs gate, up */
    GC_OP_ATTENTION,     /* inputs q, k, v, bias? (constant); params.attention */
    GC_OP_KIND_COUNT
} gc_op_kind;

typedef struct gc_op_record {
    gc_op_kind kind;
    int n_inputs;
    const gc_tensor *const *inputs; /* [n_inputs]; an entry may be NULL (an omitted gamma) */
    gc_tensor *output;
    union {
        struct { gc_binary_op op; } binary;
        struct { gc_binary_op op; double value; bool scalar_first; } scalar;
        struct { gc_unary_op op; } unary;
        struct { bool trans_a, trans_b; } matmul;
        struct { gc_reduce_op op; bool keepdim; gc_tensor *argmax; /* i32, for max */ } reduce;
        struct { int first, count; } sum_dims;
        struct { bool log; double scale; } softmax; /* of scale x (+ the bias, inputs[1]) */
        struct { double eps; } layernorm;
        struct { double eps; } rmsnorm;
        struct { int perm[GC_MAX_DIMS]; } permute;
        struct { int64_t start, end; } slice;
        struct { double p; uint64_t seed, offset; } dropout;
        /* the rows' log-sum-exp [B, H, T], for the backward */
        struct { gc_attention_fused_options options; gc_tensor *lse; } attention;
    } params;
} gc_op_record;

/* Installed by the observer (autograd); NULL when none. `wants` says, cheaply, whether an
 * op over these inputs is to be recorded at all (grad mode on and an input needs a
 * gradient); only then is the record built and `record` called. */
typedef struct gc_op_observer {
    bool (*wants)(const gc_tensor *const *inputs, int n_inputs);
    /* Returns false when recording failed for lack of memory (the error is set); the op
     * then releases its output and returns NULL. */
    bool (*record)(const gc_op_record *record);
} gc_op_observer;

void gc_set_op_observer(const gc_op_observer *observer);

/* The last step of every op front-end: offers the finished op to the observer and returns
 * record->output, or NULL (with the output released) when the output is NULL or recording
 * failed. Usage: return gc_finish_op(&(gc_op_record){.kind = ..., .output = out, ...}); */
gc_tensor *gc_finish_op(const gc_op_record *record);
/* Whether an op over these inputs would be recorded (the observer wants it): for the ops
 * that have no backward and refuse to run where a graph would need one. */
bool gc_op_would_record(const gc_tensor *const *inputs, int n_inputs);

#endif
