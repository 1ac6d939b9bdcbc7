/* Backward rules of the elementwise ops. Each gradient is the incoming gradient times the
 * local derivative, summed back to the input's shape where the input was broadcast. */
#include "rules.h"

/* --- a op b, with broadcasting --- */

static bool save_binary(gc_node *node, const gc_op_record *record) {
    gc_binary_op op = record->params.binary.op;
    if (op == GC_BINARY_MUL || op == GC_BINARY_DIV) { /* d(a*b) and d(a/b) need both */
        gc_node_save(node, 0, record->inputs[0]);
        gc_node_save(node, 1, record->inputs[1]);
    }
    return true;
}

static bool backward_binary(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    const gc_tensor *a = node->saved[0], *b = node->saved[1];
    gc_tensor *grad_a = NULL, *grad_b = NULL;
    bool need_a = gc_rule_needs(node, 0), need_b = gc_rule_needs(node, 1);
    switch (node->record.params.binary.op) {
    case GC_BINARY_ADD:
        grad_a = need_a ? gc_tensor_retain(g) : NULL;
        grad_b = need_b ? gc_tensor_retain(g) : NULL;
        break;
    case GC_BINARY_SUB:
        grad_a = need_a ? gc_tensor_retain(g) : NULL;
        grad_b = need_b ? gc_neg(g) : NULL;
        break;
    case GC_BINARY_MUL:
        grad_a = need_a ? gc_mul(g, b) : NULL;
        grad_b = need_b ? gc_mul(g, a) : NULL;
        break;
    case GC_BINARY_DIV: { /* d/da = 1/b, d/db = -a/b^2 = -(g/b)(a/b) */
        gc_tensor *g_over_b = gc_div(g, b);
        if (need_b) {
            gc_tensor *a_over_b = gc_div(a, b);
            gc_tensor *product = gc_mul(g_over_b, a_over_b);
            grad_b = gc_neg(product);
            gc_tensor_release(a_over_b);
            gc_tensor_release(product);
        }
        grad_a = need_a ? gc_tensor_retain(g_over_b) : NULL;
        gc_tensor_release(g_over_b);
        break;
    }
    }
    if (need_a) grad_inputs[0] = gc_rule_to_input_shape(node, 0, grad_a);
    if (need_b) grad_inputs[1] = gc_rule_to_input_shape(node, 1, grad_b);
    return (!need_a || grad_inputs[0]) && (!need_b || grad_inputs[1]);
}

const gc_backward_rule gc_rule_binary = {"binary", save_binary, backward_binary};

/* --- expand: the gradient summed back over the repeated dims --- */

static bool backward_expand(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    grad_inputs[0] = gc_rule_to_input_shape(node, 0, gc_tensor_retain(g));
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_expand = {"expand", gc_rule_save_nothing, backward_expand};

/* --- dropout: the same mask (regenerated from the recorded seed and offset, and the rows'
 * positions of gc_dropout_rows) scales g --- */

static bool save_dropout(gc_node *node, const gc_op_record *record) {
    if (record->n_inputs == 2) gc_node_save(node, 0, record->inputs[1]); /* the rows' positions */
    return true;
}

static bool backward_dropout(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    double p = node->record.params.dropout.p;
    uint64_t seed = node->record.params.dropout.seed, offset = node->record.params.dropout.offset;
    grad_inputs[0] = node->record.n_inputs == 2 ? gc_dropout_rows(g, node->saved[0], p, seed, offset)
                                                : gc_dropout(g, p, seed, offset);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_dropout = {"dropout", save_dropout, backward_dropout};

/* --- a op s, s op a --- */

static bool save_binary_scalar(gc_node *node, const gc_op_record *record) {
    if (record->params.scalar.op == GC_BINARY_DIV && record->params.scalar.scalar_first) {
        gc_node_save(node, 0, record->inputs[0]); /* d(s/a)/da = -(s/a)/a */
        gc_node_save(node, 1, record->output);
    }
    return true;
}

static bool backward_binary_scalar(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    double s = node->record.params.scalar.value;
    bool scalar_first = node->record.params.scalar.scalar_first;
    switch (node->record.params.scalar.op) {
    case GC_BINARY_ADD: grad_inputs[0] = gc_tensor_retain(g); break;
    case GC_BINARY_SUB: grad_inputs[0] = scalar_first ? gc_neg(g) : gc_tensor_retain(g); break;
    case GC_BINARY_MUL: grad_inputs[0] = gc_mul_scalar(g, s); break;
    case GC_BINARY_DIV:
        if (scalar_first) {
            gc_tensor *out_over_a = gc_div(node->saved[1], node->saved[0]);
            gc_tensor *product = gc_mul(g, out_over_a);
            grad_inputs[0] = gc_neg(product);
            gc_tensor_release(out_over_a);
            gc_tensor_release(product);
        } else {
            grad_inputs[0] = gc_div_scalar(g, s);
        }
        break;
    }
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_binary_scalar = {"binary_scalar", save_binary_scalar, backward_binary_scalar};

/* --- unary: each derivative from the input or from the output, whichever is cheaper --- */

static bool derivative_uses_output(gc_unary_op op) {
    return op == GC_UNARY_EXP || op == GC_UNARY_TANH || op == GC_UNARY_SQRT || op == GC_UNARY_RSQRT;
}

static bool save_unary(gc_node *node, const gc_op_record *record) {
    gc_unary_op op = record->params.unary.op;
    if (op != GC_UNARY_NEG)
        gc_node_save(node, 0, derivative_uses_output(op) ? record->output : record->inputs[0]);
    return true;
}

/* dy/dx as a tensor, from x or y (saved). */
static gc_tensor *local_derivative(gc_unary_op op, const gc_tensor *saved) {
    gc_tensor *square = NULL, *derivative = NULL;
    switch (op) {
    case GC_UNARY_EXP: return gc_tensor_retain((gc_tensor *)saved);          /* e^x = y */
    case GC_UNARY_LOG: return gc_rdiv_scalar(saved, 1.0);                     /* 1/x */
    case GC_UNARY_TANH:                                                       /* 1 - y^2 */
        square = gc_mul(saved, saved);
        derivative = gc_rsub_scalar(square, 1.0);
        break;
    case GC_UNARY_SQRT: return gc_rdiv_scalar(saved, 0.5);                    /* 1/(2y) */
    case GC_UNARY_RSQRT: {                                                    /* -y^3/2 */
        square = gc_mul(saved, saved);
        gc_tensor *cube = gc_mul(square, saved);
        derivative = gc_mul_scalar(cube, -0.5);
        gc_tensor_release(cube);
        break;
    }
    default: gc_fatal("autograd: unary op %d has no derivative", (int)op);
    }
    gc_tensor_release(square);
    return derivative;
}

/* For the activations, whose derivative is an op of x: that op into *derivative, for one
 * fused pass g * derivative(x) (gc_unary_grad). */
static bool activation_derivative(gc_unary_op op, gc_unary_op *derivative) {
    switch (op) {
    case GC_UNARY_RELU: *derivative = GC_UNARY_RELU_GRAD; return true;
    case GC_UNARY_GELU_TANH: *derivative = GC_UNARY_GELU_TANH_GRAD; return true;
    case GC_UNARY_GELU_ERF: *derivative = GC_UNARY_GELU_ERF_GRAD; return true;
    default: return false;
    }
}

static bool backward_unary(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    gc_unary_op op = node->record.params.unary.op, derivative;
    if (op == GC_UNARY_NEG) {
        grad_inputs[0] = gc_neg(g);
    } else if (activation_derivative(op, &derivative)) {
        grad_inputs[0] = gc_unary_grad(derivative, node->saved[0], g);
    } else {
        gc_tensor *derivative = local_derivative(op, node->saved[0]);
        grad_inputs[0] = gc_mul(g, derivative);
        gc_tensor_release(derivative);
    }
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_unary = {"unary", save_unary, backward_unary};
