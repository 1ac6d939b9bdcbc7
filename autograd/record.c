/* Recording: the op observer that turns a finished op into a graph node. */
#include <stdlib.h>

#include "graph.h"

static uint64_t next_sequence; /* execution order across the process */

bool gc_autograd_wants(const gc_tensor *const *inputs, int n_inputs) {
    if (!gc_grad_enabled()) return false;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && gc_requires_grad(inputs[i])) return true;
    return false;
}

gc_node *gc_node_new(const gc_backward_rule *rule, const gc_op_record *record) {
    size_t n = (size_t)record->n_inputs;
    gc_node *node = calloc(1, sizeof *node + n * (sizeof(gc_edge) + sizeof(gc_input_meta)));
    if (!node) gc_fatal("autograd: out of host memory for a graph node");
    node->edges = (gc_edge *)(node + 1);
    node->inputs = (gc_input_meta *)(node->edges + n);
    node->rule = rule;
    node->record = *record;
    /* Rules reach tensors only through what save() kept: the recorded pointers are not owned. */
    node->record.inputs = NULL;
    node->record.output = NULL;
    node->sequence = next_sequence++;
    node->n_inputs = record->n_inputs;
    node->refcount = 1; /* the output's */
    for (int i = 0; i < record->n_inputs; i++) {
        const gc_tensor *input = record->inputs[i];
        if (!input) continue;
        node->inputs[i] = (gc_input_meta){.ndim = input->ndim, .dtype = input->dtype, .device = input->device};
        for (int d = 0; d < GC_MAX_DIMS; d++) node->inputs[i].shape[d] = input->shape[d];
        gc_autograd_meta *meta = gc_meta(input);
        if (meta && meta->node) {
            node->edges[i].node = meta->node;
            gc_node_retain(meta->node);
        } else if (meta && meta->requires_grad) {
            /* The graph keeps the leaf alive; the count is bookkeeping, not a write. */
            node->edges[i].leaf = gc_tensor_retain((gc_tensor *)input);
        }
    }
    return node;
}

static bool record(const gc_op_record *record) {
    gc_node *node = gc_node_new(gc_rule_for(record), record);
    if (!node->rule->save(node, record)) {
        gc_node_release(node);
        return false;
    }
    gc_meta_get_or_create(record->output)->node = node;
    return true;
}

static const gc_op_observer autograd_observer = {.wants = gc_autograd_wants, .record = record};

void gc_autograd_install(void) { gc_set_op_observer(&autograd_observer); }
