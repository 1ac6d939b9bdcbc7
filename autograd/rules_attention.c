/* --- fused attention (gc_attention_fused): dq, dk, dv by the backend's backward kernel,
 * which recomputes the probabilities from the rows' log-sum-exp the forward kept
 * (FlashAttention-2), in the working dtype, each rounded once into its input's dtype
 * (rules.h). The bias is a constant mask, as softmax_scaled's: no gradient. --- */
#include "rules.h"

enum { SAVED_Q, SAVED_K, SAVED_V, SAVED_BIAS, SAVED_OUT, SAVED_LSE };

static bool save_attention(gc_node *node, const gc_op_record *record) {
    for (int i = 0; i < 4; i++) gc_node_save(node, i, record->inputs[i]); /* q, k, v, bias (or NULL) */
    gc_node_save(node, SAVED_OUT, record->output);
    gc_node_save(node, SAVED_LSE, record->params.attention.lse);
    return true;
}

static bool backward_attention(gc_node *node, gc_tensor *g, gc_tensor **grad_inputs) {
    if (gc_rule_needs(node, SAVED_BIAS))
        gc_fatal("attention_fused: the bias is a constant mask with no gradient (it requires one)");
    gc_tensor *const *s = node->saved;
    gc_attention_fused_saved saved = {s[SAVED_Q], s[SAVED_K], s[SAVED_V], s[SAVED_BIAS], s[SAVED_OUT], s[SAVED_LSE],
                                      &node->record.params.attention.options};
    gc_tensor *grads[3];
    if (!gc_attention_fused_backward(&saved, g, &grads[0], &grads[1], &grads[2])) return false;
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        if (gc_rule_needs(node, i)) {
            grad_inputs[i] = gc_rule_narrow(grads[i], node->inputs[i].dtype);
            ok = ok && grad_inputs[i];
        } else {
            gc_tensor_release(grads[i]);
        }
    }
    return ok;
}

const gc_backward_rule gc_rule_attention = {"attention_fused", save_attention, backward_attention};
