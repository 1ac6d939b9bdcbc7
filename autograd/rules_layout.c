/* Backward rules of the ops that move data without computing: each gradient goes back
 * to where its element came from. */
#include "rules.h"

/* --- embedding: rows of the table gathered -> gradient rows scattered back (summed) ---
 * The sum runs in the working dtype (f32 for a 16-bit table: a token seen a thousand times in
 * a batch would otherwise lose most of its gradient to 16-bit roundings of a running sum). */

static bool save_embedding(gc_node *node, const gc_op_record *record) {
    gc_node_save(node, 0, record->inputs[1]); /* the ids */
    return true;
}

static bool backward_embedding(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    gc_tensor *working = gc_to_working(g);
    gc_tensor *table_grad = gc_embedding_backward(working, node->saved[0], node->inputs[0].shape[0]);
    grad_inputs[0] = gc_rule_narrow(table_grad, node->inputs[0].dtype);
    gc_tensor_release(working);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_embedding = {"embedding", save_embedding, backward_embedding};

/* --- permute: the inverse permutation --- */

static bool backward_permute(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    int inverse[GC_MAX_DIMS];
    for (int d = 0; d < node->inputs[0].ndim; d++) inverse[node->record.params.permute.perm[d]] = d;
    grad_inputs[0] = gc_permute(g, inverse);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_permute = {"permute", gc_rule_save_nothing, backward_permute};

/* --- slice0: the gradient fills its rows of a zero tensor of the input's shape --- */

static bool backward_slice0(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    const gc_input_meta *input = &node->inputs[0];
    gc_tensor *full = gc_zeros(input->ndim, input->shape, input->dtype, g->device);
    gc_tensor *rows = gc_slice0(full, node->record.params.slice.start, node->record.params.slice.end);
    if (rows) gc_copy_(rows, g);
    gc_tensor_release(rows);
    grad_inputs[0] = rows ? full : NULL;
    if (!rows) gc_tensor_release(full);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_slice0 = {"slice0", gc_rule_save_nothing, backward_slice0};

/* --- reshape: the gradient viewed in the input's shape --- */

static bool backward_reshape(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    grad_inputs[0] = gc_reshape(g, node->inputs[0].ndim, node->inputs[0].shape);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_reshape = {"reshape", gc_rule_save_nothing, backward_reshape};

/* --- cat0: each input's gradient is its rows of g (views, no copy) --- */

static bool backward_cat0(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    int64_t start = 0;
    bool ok = true;
    for (int i = 0; i < node->n_inputs; i++) {
        int64_t rows = node->inputs[i].shape[0];
        if (gc_rule_needs(node, i)) {
            grad_inputs[i] = gc_slice0(g, start, start + rows);
            ok = ok && grad_inputs[i];
        }
        start += rows;
    }
    return ok;
}

const gc_backward_rule gc_rule_cat0 = {"cat0", gc_rule_save_nothing, backward_cat0};

/* --- cast: the gradient cast back to the input's dtype --- */

static bool backward_cast(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    grad_inputs[0] = gc_cast(g, node->inputs[0].dtype);
    return grad_inputs[0] != NULL;
}

const gc_backward_rule gc_rule_cast = {"cast", gc_rule_save_nothing, backward_cast};
