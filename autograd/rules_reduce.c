/* Backward rules of the reductions and the normalisations over the last dim. */
#include "rules.h"

/* The incoming gradient of a reduction over the last dim, as [..., 1] (it may have been
 * recorded without keepdim), broadcast back over the input's shape. */
static gc_tensor *expand_over_last(const gc_node *node, const gc_tensor *g) {
    const gc_input_meta *input = &node->inputs[0];
    int64_t kept[GC_MAX_DIMS];
    for (int d = 0; d < input->ndim; d++) kept[d] = input->shape[d];
    if (input->ndim) kept[input->ndim - 1] = 1;
    gc_tensor *column = gc_reshape(g, input->ndim, kept);
    gc_tensor *expanded = gc_expand(column, input->ndim, input->shape);
    gc_tensor_release(column);
    return expanded;
}

static int64_t input_numel(const gc_input_meta *input) {
    int64_t numel = 1;
    for (int d = 0; d < input->ndim; d++) numel *= input->shape[d];
    return numel;
}

/* The max's gradient goes to the first maximum only: a scatter at the saved argmax. */
static gc_tensor *scatter_to_argmax(const gc_node *node, const gc_tensor *g, int64_t cols) {
    const gc_input_meta *input = &node->inputs[0];
    const gc_tensor *argmax = node->saved[0];
    int64_t rows = cols ? input_numel(input) / cols : 0;
    gc_tensor *flat_g = gc_reshape(g, GC_SHAPE(rows));
    gc_tensor *flat_index = gc_reshape(argmax, GC_SHAPE(rows));
    gc_tensor *scattered = gc_scatter_last(flat_g, flat_index, cols);
    gc_tensor *shaped = gc_reshape(scattered, input->ndim, input->shape);
    gc_tensor_release(flat_g);
    gc_tensor_release(flat_index);
    gc_tensor_release(scattered);
    return shaped;
}

static bool save_reduce(gc_node *node, const gc_op_record *record) {
    if (record->params.reduce.op == GC_REDUCE_MAX) gc_node_save(node, 0, record->params.reduce.argmax);
    return true;
}

static bool backward_reduce(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs, int64_t cols,
                            bool over_last) {
    const gc_input_meta *input = &node->inputs[0];
    switch (node->record.params.reduce.op) {
    case GC_REDUCE_MAX: grad_inputs[0] = scatter_to_argmax(node, g, cols); break;
    case GC_REDUCE_SUM:
    case GC_REDUCE_MEAN: {
        gc_tensor *expanded = over_last ? expand_over_last(node, g) : gc_expand(g, input->ndim, input->shape);
        if (node->record.params.reduce.op == GC_REDUCE_SUM) {
            grad_inputs[0] = expanded;
        } else {
            grad_inputs[0] = gc_div_scalar(expanded, (double)cols);
            gc_tensor_release(expanded);
        }
        break;
    }
    }
    return grad_inputs[0] != NULL;
}

static bool backward_reduce_last(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    const gc_input_meta *input = &node->inputs[0];
    return backward_reduce(node, g, grad_inputs, input->ndim ? input->shape[input->ndim - 1] : 1, true);
}

static bool backward_reduce_all(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    return backward_reduce(node, g, grad_inputs, input_numel(&node->inputs[0]), false);
}

const gc_backward_rule gc_rule_reduce_last = {"reduce_last", save_reduce, backward_reduce_last};
const gc_backward_rule gc_rule_reduce_all = {"reduce_all", save_reduce, backward_reduce_all};

/* sum over dims [first, first + count): g has the input's shape less those dims; it is
 * given them back as 1s and broadcast over them. */
static bool backward_sum_dims(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    const gc_input_meta *input = &node->inputs[0];
    int first = node->record.params.sum_dims.first, count = node->record.params.sum_dims.count;
    int64_t kept[GC_MAX_DIMS];
    for (int d = 0; d < input->ndim; d++) kept[d] = d >= first && d < first + count ? 1 : input->shape[d];
    gc_tensor *with_ones = gc_reshape(g, input->ndim, kept);
    grad_inputs[0] = gc_expand(with_ones, input->ndim, input->shape);
    gc_tensor_release(with_ones);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_sum_dims = {"sum_dims", gc_rule_save_nothing, backward_sum_dims};

/* --- softmax: dx = y (g - sum(g y));  log-softmax: dx = g - e^y sum(g) ---
 * in the working dtype (f32 for 16-bit inputs: see rules.h). A scaled softmax, of scale x +
 * bias, has dx = scale y (g - sum(g y)); its bias is a constant mask, with no gradient. */

static bool save_softmax(gc_node *node, const gc_op_record *record) {
    gc_node_save(node, 0, record->output);
    return true;
}

static bool backward_softmax(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    if (node->n_inputs > 1 && gc_rule_needs(node, 1))
        gc_fatal("softmax_scaled: the bias is a constant mask with no gradient (it requires one)");
    double scale = node->record.params.softmax.scale;
    gc_tensor *y = gc_to_working(node->saved[0]), *working_g = gc_to_working(g);
    gc_tensor *dx = gc_softmax_backward(y, working_g, node->record.params.softmax.log, scale);
    grad_inputs[0] = gc_rule_narrow(dx, node->inputs[0].dtype);
    gc_tensor_release(y);
    gc_tensor_release(working_g);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_softmax = {"softmax", save_softmax, backward_softmax};

/* --- layernorm ---
 * With xhat = (x - mean) rstd and dxhat = g gamma:
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),
 *   dgamma = sum over rows of g xhat,  dbeta = sum over rows of g.
 * mean and rstd are recomputed from x in x's working dtype (f32 for 16-bit inputs, where the
 * whole rule runs: see rules.h) rather than taken from the f32 statistics of the forward, so
 * that an f64 gradient check is exact to f64. */

static bool save_layernorm(gc_node *node, const gc_op_record *record) {
    gc_node_save(node, 0, record->inputs[0]);
    gc_node_save(node, 1, record->inputs[1]); /* gamma, or NULL */
    return true;
}

static bool backward_layernorm(gc_node *node, gc_tensor *g_stored, gc_tensor **grad_inputs) {
    gc_tensor *x = gc_to_working(node->saved[0]), *gamma = gc_to_working(node->saved[1]);
    gc_tensor *g = gc_to_working(g_stored), *dx = NULL, *g_xhat = NULL;
    double eps = node->record.params.layernorm.eps;
    bool need_gamma = node->n_inputs > 1 && gc_rule_needs(node, 1);
    gc_tensor **dx_wanted = gc_rule_needs(node, 0) ? &dx : NULL, **g_xhat_wanted = need_gamma ? &g_xhat : NULL;
    if (x && g && (!node->saved[1] || gamma)) gc_layernorm_backward(x, gamma, g, eps, dx_wanted, g_xhat_wanted);
    grad_inputs[0] = dx;
    if (need_gamma) grad_inputs[1] = gc_rule_to_input_shape(node, 1, g_xhat);
    if (node->n_inputs > 2 && gc_rule_needs(node, 2))
        grad_inputs[2] = gc_rule_to_input_shape(node, 2, gc_tensor_retain(g));
    for (int i = 0; i < node->n_inputs; i++) grad_inputs[i] = gc_rule_narrow(grad_inputs[i], node->inputs[i].dtype);
    gc_tensor *temporaries[] = {x, gamma, g};
    for (int i = 0; i < 3; i++) gc_tensor_release(temporaries[i]);
    for (int i = 0; i < node->n_inputs; i++)
        if (gc_rule_needs(node, i) && !grad_inputs[i]) return false;
    return true;
}

const gc_backward_rule gc_rule_layernorm = {"layernorm", save_layernorm, backward_layernorm};
