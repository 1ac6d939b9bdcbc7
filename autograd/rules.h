/* Shared by the backward rules (rules_*.c). */
#ifndef GC_AUTOGRAD_RULES_H
#define GC_AUTOGRAD_RULES_H

#include "graph.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"

/* True when input i of the node needs a gradient. */
static inline bool gc_rule_needs(const gc_node *node, int i) {
    return node->edges[i].node || node->edges[i].leaf;
}

/* Sums `grad` (a reference taken over) down to the shape of input i, undoing broadcasting. */
static inline gc_tensor *gc_rule_to_input_shape(const gc_node *node, int i, gc_tensor *grad) {
    const gc_input_meta *input = &node->inputs[i];
    gc_tensor *reduced = gc_sum_to_shape(grad, input->ndim, input->shape);
    gc_tensor_release(grad);
    return reduced;
}

/* Half-precision rules: a rule whose arithmetic spans a row (softmax, layernorm, the
 * embedding's scatter-add) computes in the working dtype (gc_to_working: f32 for f16 and
 * bf16), so that its intermediate sums are not rounded to 16 bits at every step, and rounds
 * each result once into its input's dtype with this. Takes over `grad`'s reference. */
static inline gc_tensor *gc_rule_narrow(gc_tensor *grad, gc_dtype dtype) {
    if (!grad || grad->dtype == dtype) return grad;
    gc_tensor *narrowed = gc_cast(grad, dtype);
    gc_tensor_release(grad);
    return narrowed;
}

/* A save() for rules that need nothing kept. */
bool gc_rule_save_nothing(gc_node *node, const gc_op_record *record);

extern const gc_backward_rule gc_rule_binary, gc_rule_binary_scalar, gc_rule_unary, gc_rule_expand,
    gc_rule_dropout;
extern const gc_backward_rule gc_rule_matmul;
extern const gc_backward_rule gc_rule_reduce_last, gc_rule_reduce_all, gc_rule_sum_dims, gc_rule_softmax, gc_rule_layernorm;
extern const gc_backward_rule gc_rule_embedding, gc_rule_permute, gc_rule_slice0, gc_rule_reshape,
    gc_rule_cat0, gc_rule_cast;
extern const gc_backward_rule gc_rule_rmsnorm, gc_rule_rope, gc_rule_swiglu;
extern const gc_backward_rule gc_rule_attention;

#endif
