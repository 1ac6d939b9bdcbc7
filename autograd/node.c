/* Node lifetime. A node is freed when its output tensor and every downstream node have
 * let go of it. Freeing is iterative: releasing the output of a 10,000-op chain frees
 * 10,000 nodes without 10,000 nested calls. */
#include <stdlib.h>

#include "graph.h"

void gc_node_retain(gc_node *node) { node->refcount++; }

void gc_node_save(gc_node *node, int slot, const gc_tensor *t) {
    if (slot >= GC_MAX_SAVED) gc_fatal("autograd: rule %s saves more than %d tensors", node->rule->name, GC_MAX_SAVED);
    node->saved[slot] = t ? gc_save_view(t) : NULL;
}

/* Nodes whose last reference was dropped, waiting to be freed. */
typedef struct node_stack {
    gc_node **items;
    size_t depth, capacity;
} node_stack;

static void push(node_stack *stack, gc_node *node) {
    if (stack->depth == stack->capacity) {
        stack->capacity = stack->capacity ? stack->capacity * 2 : 64;
        stack->items = realloc(stack->items, stack->capacity * sizeof *stack->items);
        if (!stack->items) gc_fatal("autograd: out of host memory while freeing a graph");
    }
    stack->items[stack->depth++] = node;
}

/* Drops the node's holdings: gradient, saved tensors, edges. Upstream nodes left without a
 * reference go on `orphans` rather than being freed recursively. */
static void drop_holdings(gc_node *node, node_stack *orphans) {
    gc_tensor_release(node->grad);
    node->grad = NULL;
    for (int i = 0; i < GC_MAX_SAVED; i++) {
        gc_tensor_release(node->saved[i]);
        node->saved[i] = NULL;
    }
    for (int i = 0; i < node->n_inputs; i++) {
        gc_tensor_release(node->edges[i].leaf);
        gc_node *upstream = node->edges[i].node;
        node->edges[i] = (gc_edge){NULL, NULL};
        if (upstream && --upstream->refcount == 0) push(orphans, upstream);
    }
}

static void free_orphans(node_stack *orphans) {
    while (orphans->depth) {
        gc_node *node = orphans->items[--orphans->depth];
        drop_holdings(node, orphans);
        free(node);
    }
    free(orphans->items);
}

void gc_node_release(gc_node *node) {
    if (--node->refcount > 0) return;
    node_stack orphans = {0};
    drop_holdings(node, &orphans);
    free(node);
    free_orphans(&orphans);
}

void gc_node_clear(gc_node *node) {
    node_stack orphans = {0};
    drop_holdings(node, &orphans);
    node->consumed = true;
    free_orphans(&orphans);
}
