/* The graph as Graphviz DOT (gradcache/autograd.h). Nodes are named by their execution order
 * ("op17") and leaves by the order they are met ("leaf3"), after a cluster's id when the graph
 * is one of several in a file, so that the same program writes the same file. The walk is
 * iterative and keeps its own list of what it has seen: the nodes' visit marks belong to
 * backward. */
#include <stdlib.h>

#include "graph.h"

/* What the walk has met, in order. */
typedef struct seen {
    const void **items;
    int count, capacity;
} seen;

/* The position of `item` in list, adding it when new (*added true). */
static int find_or_add(seen *list, const void *item, bool *added) {
    for (int i = 0; i < list->count; i++)
        if (list->items[i] == item) {
            *added = false;
            return i;
        }
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? 2 * list->capacity : 64;
        list->items = realloc(list->items, (size_t)list->capacity * sizeof *list->items);
        if (!list->items) gc_fatal("autograd_write_dot: out of host memory");
    }
    *added = true;
    list->items[list->count] = item;
    return list->count++;
}

/* "[4, 8] f32 cpu" of an input or a tensor. */
static const char *describe(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device, char *buf, int size) {
    char dims[96], where[16];
    snprintf(buf, (size_t)size, "%s %s %s", gc_shape_str(ndim, shape, dims, sizeof dims), gc_dtype_name(dtype),
             gc_device_str(device, where, sizeof where));
    return buf;
}

static void write_leaf(FILE *out, const char *id, int index, const gc_tensor *leaf) {
    char text[160], grad[160];
    const gc_tensor *g = gc_grad(leaf);
    fprintf(out, "  %sleaf%d [shape=ellipse, label=\"leaf\\n%s\\ngrad: %s\"];\n", id, index,
            describe(leaf->ndim, leaf->shape, leaf->dtype, leaf->device, text, sizeof text),
            g ? describe(g->ndim, g->shape, g->dtype, g->device, grad, sizeof grad) : "none yet");
}

/* The recorded op's own name where the rule covers a family ("mul", not "binary"). */
static const char *op_name(const gc_node *node) {
    static const char *const unary[] = {"neg", "exp", "log", "tanh", "relu", "gelu_tanh", "gelu_erf", "sqrt",
                                        "rsqrt", "relu'", "gelu_tanh'", "gelu_erf'"};
    static const char *const binary[] = {"add", "sub", "mul", "div"};
    static const char *const scalar[] = {"add_scalar", "sub_scalar", "mul_scalar", "div_scalar"};
    static const char *const last[] = {"sum_last", "mean_last", "max_last"}, *const all[] = {"sum_all", "mean_all",
                                                                                            "max_all"};
    const gc_op_record *r = &node->record;
    switch (r->kind) {
    case GC_OP_UNARY: return unary[r->params.unary.op];
    case GC_OP_BINARY: return binary[r->params.binary.op];
    case GC_OP_BINARY_SCALAR: return scalar[r->params.scalar.op];
    case GC_OP_REDUCE_LAST: return last[r->params.reduce.op];
    case GC_OP_REDUCE_ALL: return all[r->params.reduce.op];
    case GC_OP_SOFTMAX:
        if (r->params.softmax.log) return "log_softmax";
        return r->params.softmax.scale != 1.0 || node->n_inputs > 1 ? "softmax_scaled" : "softmax";
    default: return node->rule->name;
    }
}

static void write_node(FILE *out, const char *id, const gc_node *node) {
    size_t bytes = 0;
    int saved = 0;
    for (int k = 0; k < GC_MAX_SAVED; k++)
        if (node->saved[k]) bytes += gc_nbytes(node->saved[k]), saved++;
    fprintf(out, "  %sop%llu [shape=box, label=\"#%llu %s\\n", id, (unsigned long long)node->sequence,
            (unsigned long long)node->sequence, op_name(node));
    if (node->consumed) fprintf(out, "backward ran: saved tensors released\"];\n");
    else fprintf(out, "saved for backward: %d tensor%s, %zu bytes\"];\n", saved, saved == 1 ? "" : "s", bytes);
}

/* Writes every node and leaf reachable from `root`, and the arrows into them. */
static void walk(FILE *out, const char *id, gc_node *root, seen *nodes, seen *leaves) {
    bool added;
    find_or_add(nodes, root, &added);
    if (!added) return;
    gc_node **stack = malloc(sizeof *stack), **grown;
    int depth = 0, capacity = 1;
    if (!stack) gc_fatal("autograd_write_dot: out of host memory");
    stack[depth++] = root;
    while (depth) {
        const gc_node *node = stack[--depth];
        write_node(out, id, node);
        for (int i = 0; i < node->n_inputs; i++) {
            const gc_edge *edge = &node->edges[i];
            const gc_input_meta *in = &node->inputs[i];
            char label[160];
            describe(in->ndim, in->shape, in->dtype, in->device, label, sizeof label);
            if (edge->leaf) {
                int index = find_or_add(leaves, edge->leaf, &added);
                if (added) write_leaf(out, id, index, edge->leaf);
                fprintf(out, "  %sleaf%d -> %sop%llu [label=\"%s\"];\n", id, index, id,
                        (unsigned long long)node->sequence, label);
            } else if (edge->node) {
                fprintf(out, "  %sop%llu -> %sop%llu [label=\"%s\"];\n", id,
                        (unsigned long long)edge->node->sequence, id, (unsigned long long)node->sequence, label);
                find_or_add(nodes, edge->node, &added);
                if (!added) continue;
                if (depth == capacity) {
                    capacity *= 2;
                    if (!(grown = realloc(stack, (size_t)capacity * sizeof *stack)))
                        gc_fatal("autograd_write_dot: out of host memory");
                    stack = grown;
                }
                stack[depth++] = edge->node;
            }
        }
    }
    free(stack);
}

/* The nodes, leaves, outputs and arrows of the graph, every name prefixed with `id`. */
static void write_body(FILE *out, const char *id, gc_tensor *const *outputs, int count) {
    seen nodes = {0}, leaves = {0};
    for (int i = 0; i < count; i++) {
        const gc_tensor *t = outputs[i];
        char text[160];
        fprintf(out, "  %soutput%d [shape=box, style=bold, label=\"output %d\\n%s\"];\n", id, i, i,
                describe(t->ndim, t->shape, t->dtype, t->device, text, sizeof text));
        const gc_autograd_meta *meta = gc_meta(t);
        if (meta && meta->node) {
            walk(out, id, meta->node, &nodes, &leaves);
            fprintf(out, "  %sop%llu -> %soutput%d;\n", id, (unsigned long long)meta->node->sequence, id, i);
        } else if (meta && meta->requires_grad) {
            bool added;
            int index = find_or_add(&leaves, t, &added);
            if (added) write_leaf(out, id, index, t);
            fprintf(out, "  %sleaf%d -> %soutput%d;\n", id, index, id, i);
        }
    }
    free(nodes.items);
    free(leaves.items);
}

static gc_status written(FILE *out, const char *what) {
    if (fflush(out) == 0 && !ferror(out)) return GC_OK;
    gc_set_error(GC_ERR_IO, "%s: cannot write the graph", what);
    return GC_ERR_IO;
}

gc_status gc_autograd_write_dot(FILE *out, gc_tensor *const *outputs, int count) {
    fprintf(out, "digraph autograd {\n  rankdir=BT;\n  node [fontname=\"monospace\", fontsize=10];\n"
                 "  edge [fontname=\"monospace\", fontsize=9];\n");
    write_body(out, "", outputs, count);
    fprintf(out, "}\n");
    return written(out, "autograd_write_dot");
}

gc_status gc_autograd_write_dot_cluster(FILE *out, const char *id, const char *label, gc_tensor *const *outputs,
                                        int count) {
    for (const char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            gc_fatal("autograd_write_dot_cluster: id \"%s\" is not letters, digits and '_'", id);
    fprintf(out, "  subgraph cluster_%s {\n  label=\"", id);
    for (const char *c = label; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', out); /* DOT's escapes in a quoted string */
        fputc(*c, out);
    }
    fprintf(out, "\";\n");
    write_body(out, id, outputs, count);
    fprintf(out, "  }\n");
    return written(out, "autograd_write_dot_cluster");
}
