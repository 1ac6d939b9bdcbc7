/* From a recorded op to its backward rule. */
#include "rules.h"

bool gc_rule_save_nothing(gc_node *node, const gc_op_record *record) {
    (void)node;
    (void)record;
    return true;
}

const gc_backward_rule *gc_rule_for(const gc_op_record *record) {
    static const gc_backward_rule *const rules[GC_OP_KIND_COUNT] = {
        [GC_OP_BINARY] = &gc_rule_binary,
        [GC_OP_BINARY_SCALAR] = &gc_rule_binary_scalar,
        [GC_OP_UNARY] = &gc_rule_unary,
        [GC_OP_EXPAND] = &gc_rule_expand,
        [GC_OP_MATMUL] = &gc_rule_matmul,
        [GC_OP_REDUCE_LAST] = &gc_rule_reduce_last,
        [GC_OP_REDUCE_ALL] = &gc_rule_reduce_all,
        [GC_OP_SUM_DIMS] = &gc_rule_sum_dims,
        [GC_OP_SOFTMAX] = &gc_rule_softmax,
        [GC_OP_LAYERNORM] = &gc_rule_layernorm,
        [GC_OP_EMBEDDING] = &gc_rule_embedding,
        [GC_OP_PERMUTE] = &gc_rule_permute,
        [GC_OP_SLICE0] = &gc_rule_slice0,
        [GC_OP_RESHAPE] = &gc_rule_reshape,
        [GC_OP_CAT0] = &gc_rule_cat0,
        [GC_OP_CAST] = &gc_rule_cast,
        [GC_OP_DROPOUT] = &gc_rule_dropout,
        [GC_OP_RMSNORM] = &gc_rule_rmsnorm,
        [GC_OP_ROPE] = &gc_rule_rope,
        [GC_OP_SWIGLU] = &gc_rule_swiglu,
        [GC_OP_ATTENTION] = &gc_rule_attention,
    };
    if ((int)record->kind < 0 || record->kind >= GC_OP_KIND_COUNT || !rules[record->kind])
        gc_fatal("autograd: no backward rule for op kind %d", (int)record->kind);
    return rules[record->kind];
}
