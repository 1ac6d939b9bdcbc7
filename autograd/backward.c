/* The backward pass: collect the nodes reachable from the outputs, run their rules in
 * reverse execution order, accumulate into leaves. Iterative throughout. */
#include <stdlib.h>

#include "graph.h"
#include "gradcache/ops.h"
#include "tensor/storage.h"

static void refuse_consumed(const gc_node *node) {
    gc_fatal("backward: the graph through op '%s' (#%llu) was already consumed by an earlier backward; "
             "run the forward again to backward twice", node->rule->name, (unsigned long long)node->sequence);
}

/* Every node reachable from the roots, each retained once (so that clearing a node's
 * edges during the pass cannot free a node still to run), sorted by descending sequence;
 * and every leaf edge counted into its leaf's `pending`. */
static gc_node_list collect(gc_node *const *roots, int n_roots) {
    static uint64_t traversal; /* a fresh marker per backward, so marks need no reset */
    traversal++;
    gc_node_list found = {0}, stack = {0};
    for (int i = 0; i < n_roots; i++)
        if (roots[i] && roots[i]->visit_mark != traversal) {
            roots[i]->visit_mark = traversal;
            gc_node_list_push(&stack, roots[i]);
        }
    while (stack.count) {
        gc_node *node = stack.items[--stack.count];
        if (node->consumed) refuse_consumed(node);
        gc_node_retain(node);
        gc_node_list_push(&found, node);
        for (int i = 0; i < node->n_inputs; i++) {
            gc_edge *edge = &node->edges[i];
            if (edge->leaf) gc_meta(edge->leaf)->pending++;
            if (edge->node && edge->node->visit_mark != traversal) {
                edge->node->visit_mark = traversal;
                gc_node_list_push(&stack, edge->node);
            }
        }
    }
    free(stack.items);
    return found;
}

static int later_first(const void *a, const void *b) {
    uint64_t sa = (*(gc_node *const *)a)->sequence, sb = (*(gc_node *const *)b)->sequence;
    return sa < sb ? 1 : sa > sb ? -1 : 0;
}

/* Adds `grad` (a reference this function takes over) into *sum. */
static bool add_into(gc_tensor **sum, gc_tensor *grad) {
    if (!*sum) {
        *sum = grad;
        return true;
    }
    gc_tensor *total = gc_add(*sum, grad);
    gc_tensor_release(grad);
    if (!total) return false;
    gc_tensor_release(*sum);
    *sum = total;
    return true;
}

/* The one writer of a leaf's .grad: adds this contribution (a reference taken over, or
 * NULL for none), and after the leaf's last contribution of this backward fires its hooks
 * (unless the pass failed: a partial gradient is not announced as complete). */
static bool accumulate_grad(gc_tensor *leaf, gc_tensor *grad, bool pass_ok) {
    gc_autograd_meta *meta = gc_meta(leaf);
    bool ok = true;
    if (grad) {
        meta->reached = true;
        if (meta->grad) {
            ok = gc_add_inplace(meta->grad, grad) == GC_OK;
        } else if (grad->refcount == 1 && grad->storage->refcount == 1) {
            meta->grad = gc_tensor_retain(grad); /* nobody else sees this storage: adopt it */
        } else {
            /* A view of another tensor (a reshape's, a slice of a cat's gradient): .grad
             * gets storage of its own, since later passes add into it in place. */
            meta->grad = gc_clone(grad);
            ok = meta->grad != NULL;
        }
        gc_tensor_release(grad);
    }
    if (--meta->pending == 0) {
        if (meta->reached && pass_ok && ok)
            for (int i = 0; i < meta->n_hooks; i++) meta->hooks[i](leaf, meta->hook_data[i]);
        meta->reached = false;
    }
    return ok;
}

static gc_tensor *seed_for(int i, gc_tensor *output, gc_tensor *seed) {
    char a[128], b[128];
    if (!seed) {
        if (gc_numel(output) != 1)
            gc_fatal("backward: output %d is %s; a seed gradient is needed for more than one element", i,
                     gc_tensor_str(output, a, sizeof a));
        return gc_ones(output->ndim, output->shape, output->dtype, output->device);
    }
    if (!gc_same_shape(seed, output) || seed->dtype != output->dtype || !gc_device_equal(seed->device, output->device))
        gc_fatal("backward: seed %d is %s but output %d is %s", i, gc_tensor_str(seed, a, sizeof a), i,
                 gc_tensor_str(output, b, sizeof b));
    return gc_tensor_retain(seed);
}

gc_status gc_backward(gc_tensor *const *outputs, gc_tensor *const *seeds, int count) {
    char text[128];
    gc_node *roots[64];
    if (count < 1 || count > 64) gc_fatal("backward: %d outputs (1 to 64 are supported)", count);
    for (int i = 0; i < count; i++) {
        if (!outputs[i] || !gc_requires_grad(outputs[i]))
            gc_fatal("backward: output %d (%s) does not require a gradient", i,
                     outputs[i] ? gc_tensor_str(outputs[i], text, sizeof text) : "NULL");
        roots[i] = gc_meta(outputs[i])->node;
    }
    bool previous_mode = gc_set_grad_enabled(false); /* rules' ops build no graph */
    gc_node_list nodes = collect(roots, count);
    if (nodes.count) qsort(nodes.items, nodes.count, sizeof *nodes.items, later_first);

    bool ok = true;
    for (int i = 0; i < count; i++) { /* seeds go into the roots, or straight to leaf outputs */
        gc_tensor *seed = ok ? seed_for(i, outputs[i], seeds ? seeds[i] : NULL) : NULL;
        ok = ok && seed;
        if (roots[i]) {
            if (seed) ok = add_into(&roots[i]->grad, seed);
        } else {
            gc_meta(outputs[i])->pending++;
            ok = accumulate_grad(outputs[i], seed, ok) && ok;
        }
    }
    /* Every node runs through this loop even after a failure, so that every graph is
     * released and every leaf's pending count returns to zero. */
    for (size_t n = 0; n < nodes.count; n++) {
        gc_node *node = nodes.items[n];
        gc_tensor *stack_grads[8] = {0};
        gc_tensor **grad_inputs = node->n_inputs <= 8 ? stack_grads : calloc((size_t)node->n_inputs, sizeof *grad_inputs);
        if (!grad_inputs) gc_fatal("backward: out of host memory");
        if (ok && node->grad) ok = node->rule->backward(node, node->grad, grad_inputs);
        for (int i = 0; i < node->n_inputs; i++) {
            gc_tensor *grad = grad_inputs[i];
            if (!ok) {
                gc_tensor_release(grad);
                grad = NULL;
            }
            gc_edge *edge = &node->edges[i];
            if (edge->node && grad) ok = add_into(&edge->node->grad, grad);
            else if (edge->leaf) ok = accumulate_grad(edge->leaf, grad, ok) && ok;
            else gc_tensor_release(grad);
        }
        if (grad_inputs != stack_grads) free(grad_inputs);
        gc_node_clear(node); /* saved tensors and gradient freed as soon as the rule has run */
        gc_node_release(node);
    }
    free(nodes.items);
    gc_set_grad_enabled(previous_mode);
    if (!ok) return gc_last_status() != GC_OK ? gc_last_status() : GC_ERR_OUT_OF_MEMORY;
    return GC_OK;
}
