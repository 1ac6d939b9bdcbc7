/* Backward rules of the decoder family's ops: RMSNorm, rotary positions, SwiGLU's product.
 * Each is one fused kernel (tensor/op_internal.h) on every backend. */
#include "rules.h"

/* --- rmsnorm: dx = rstd (g w - xhat mean(g w xhat)), dw = sum over rows of g xhat ---
 * rstd is recomputed from x rather than saved, as layernorm's rule does: nothing but x and w
 * is kept, and an f64 gradient check is exact to f64. The weight's terms come in the working
 * dtype and are summed there, then rounded once (rules.h). */

static bool save_rmsnorm(gc_node *node, const gc_op_record *record) {
    gc_node_save(node, 0, record->inputs[0]);
    gc_node_save(node, 1, record->inputs[1]); /* the weight, or NULL */
    return true;
}

static bool backward_rmsnorm(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    bool need_weight = node->n_inputs > 1 && gc_rule_needs(node, 1);
    gc_tensor *g_xhat = NULL;
    if (!gc_rmsnorm_backward(node->saved[0], node->saved[1], g, node->record.params.rmsnorm.eps,
                             gc_rule_needs(node, 0) ? &grad_inputs[0] : NULL, need_weight ? &g_xhat : NULL))
        return false;
    if (need_weight)
        grad_inputs[1] = gc_rule_narrow(gc_rule_to_input_shape(node, 1, g_xhat), node->inputs[1].dtype);
    return !need_weight || grad_inputs[1];
}

const gc_backward_rule gc_rule_rmsnorm = {"rmsnorm", save_rmsnorm, backward_rmsnorm};

/* --- rope: the gradient rotated back by the same angles (a rotation's inverse is its
 * transpose); the table is a function of the positions, never of a parameter --- */

static bool save_rope(gc_node *node, const gc_op_record *record) {
    gc_node_save(node, 0, record->inputs[1]);
    return true;
}

static bool backward_rope(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    if (gc_rule_needs(node, 1)) gc_fatal("rope: the table of angles has no gradient (it requires one)");
    grad_inputs[0] = gc_rope_inverse(g, node->saved[0]);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_rope = {"rope", save_rope, backward_rope};

/* --- swiglu: d gate = g up s (1 + gate (1 - s)), d up = g gate s, s = sigmoid(gate) --- */

static bool save_swiglu(gc_node *node, const gc_op_record *record) {
    gc_node_save(node, 0, record->inputs[0]);
    gc_node_save(node, 1, record->inputs[1]);
    return true;
}

static bool backward_swiglu(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    return gc_swiglu_backward(node->saved[0], node->saved[1], g, gc_rule_needs(node, 0) ? &grad_inputs[0] : NULL,
                              gc_rule_needs(node, 1) ? &grad_inputs[1] : NULL);
}

const gc_backward_rule gc_rule_swiglu = {"swiglu", save_swiglu, backward_swiglu};
