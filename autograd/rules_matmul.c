/* Backward of c = op(a) @ op(b) (op = identity or transpose, per the recorded flags):
 *   d op(a) = g @ op(b)^T      d op(b) = op(a)^T @ g
 * and a transposed operand gets the transpose of that. Written with the transpose flags
 * of gc_matmul, so no transposed copy is ever made; batched matmuls work unchanged.
 * gc_matmul_bias records a third input, bias [N], whose gradient is g summed over rows. */
#include "rules.h"

static bool save_matmul(gc_node *node, const gc_op_record *record) {
    if (gc_rule_needs(node, 0)) gc_node_save(node, 1, record->inputs[1]); /* da needs b */
    if (gc_rule_needs(node, 1)) gc_node_save(node, 0, record->inputs[0]); /* db needs a */
    return true;
}

static bool backward_matmul(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    const gc_tensor *a = node->saved[0], *b = node->saved[1];
    bool trans_a = node->record.params.matmul.trans_a, trans_b = node->record.params.matmul.trans_b;
    if (gc_rule_needs(node, 0)) /* a = [M,K]: g b'^T;  a = [K,M] (trans_a): b' g^T */
        grad_inputs[0] = trans_a ? gc_matmul(b, g, trans_b, true) : gc_matmul(g, b, false, !trans_b);
    if (gc_rule_needs(node, 1)) /* b = [K,N]: a'^T g;  b = [N,K] (trans_b): g^T a' */
        grad_inputs[1] = trans_b ? gc_matmul(g, a, true, trans_a) : gc_matmul(a, g, !trans_a, false);
    bool has_bias = node->n_inputs == 3;
    if (has_bias && gc_rule_needs(node, 2)) grad_inputs[2] = gc_sum_to_shape(g, 1, &g->shape[1]);
    return (!gc_rule_needs(node, 0) || grad_inputs[0]) && (!gc_rule_needs(node, 1) || grad_inputs[1]) &&
           (!has_bias || !gc_rule_needs(node, 2) || grad_inputs[2]);
}

const gc_backward_rule gc_rule_matmul = {"matmul", save_matmul, backward_matmul};
