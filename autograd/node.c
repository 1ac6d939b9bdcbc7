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

void gc_node_list_push(gc_node_list *list, gc_node *node) {
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 64;
        list->items = realloc(list->items, list->capacity * sizeof *list->items);
        if (!list->items) gc_fatal("autograd: out of host memory for a list of graph nodes");
    }
    list->items[list->count++] = node;
}

/* Drops the node's holdings: gradient, saved tensors, edges. Upstream nodes left without a
 * reference go on `orphans` rather than being freed recursively. */
static void drop_holdings(gc_node *node, gc_node_list *orphans) {
    gc_tensor_release(node->grad);
    node->grad = NULL;
    for (int i = 0; i < GC_MAX_SAVED; i++) {
        gc_tensor_release(node->saved[i]);
        node->saved[i] = NULL;
    }
    if (node->extra) node->free_extra(node->extra);
    node->extra = NULL;
    for (int i = 0; i < node->n_inputs; i++) {
        gc_tensor_release(node->edges[i].leaf);
        gc_node *upstream = node->edges[i].node;
        node->edges[i] = (gc_edge){NULL, NULL};
        if (upstream && --upstream->refcount == 0) gc_node_list_push(orphans, upstream);
    }
}

static void free_orphans(gc_node_list *orphans) {
    while (orphans->count) {
        gc_node *node = orphans->items[--orphans->count];
        drop_holdings(node, orphans);
        free(node);
    }
    free(orphans->items);
}

void gc_node_release(gc_node *node) {
    if (--node->refcount > 0) return;
    gc_node_list orphans = {0};
    drop_holdings(node, &orphans);
    free(node);
    free_orphans(&orphans);
}

void gc_node_clear(gc_node *node) {
    gc_node_list orphans = {0};
    drop_holdings(node, &orphans);
    node->consumed = true;
    free_orphans(&orphans);
}
