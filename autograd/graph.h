/* The autograd graph: what a tensor's `ext` holds, and the nodes. Private to autograd/. */
#ifndef GC_AUTOGRAD_GRAPH_H
#define GC_AUTOGRAD_GRAPH_H

#include <stdint.h>

#include "gradcache/autograd.h"
#include "tensor/record.h"

typedef struct gc_node gc_node;

/* Where the gradient of one input of a node goes: the node that produced the input, or the
 * leaf itself; both NULL when the input needs no gradient. Each holds a reference. */
typedef struct gc_edge {
    gc_node *node;
    gc_tensor *leaf;
} gc_edge;

/* Shape, dtype and device of an input, kept so that rules can shape gradients without
 * keeping the input itself alive. */
typedef struct gc_input_meta {
    int ndim;
    int64_t shape[GC_MAX_DIMS];
    gc_dtype dtype;
    gc_device device;
} gc_input_meta;

/* the most a rule keeps: fused attention's q, k, v, bias, output and rows' log-sum-exp */
#define GC_MAX_SAVED 6

typedef struct gc_backward_rule gc_backward_rule;

struct gc_node {
    const gc_backward_rule *rule;
    gc_op_record record;     /* kind and params as recorded; its tensor pointers are cleared */
    uint64_t sequence;       /* execution order */
    int n_inputs;
    gc_edge *edges;          /* [n_inputs], allocated with the node */
    gc_input_meta *inputs;   /* [n_inputs], allocated with the node */
    gc_tensor *saved[GC_MAX_SAVED]; /* detached views the rule needs, released after it runs */
    void *extra;             /* what a rule keeps beyond saved[] (a checkpoint's inputs and
                              * function: checkpoint.c), freed with free_extra; NULL for ops */
    void (*free_extra)(void *extra);
    gc_tensor *grad;         /* during backward: the sum of the gradients flowing in */
    int refcount;            /* its output tensor + downstream edges */
    bool consumed;           /* a backward has run through it */
    uint64_t visit_mark;     /* backward's traversal marker */
};

/* A backward rule: which tensors to keep at record time, and the vector-Jacobian product.
 * backward() writes grad_inputs[i] (a new reference, or NULL when input i needs none,
 * i.e. node->edges[i] is empty) and returns false when an allocation failed. */
struct gc_backward_rule {
    const char *name;
    bool (*save)(gc_node *node, const gc_op_record *record);
    bool (*backward)(gc_node *node, gc_tensor *grad_out, gc_tensor **grad_inputs);
};

/* A node of `rule` for `record` (its kind and params copied, its tensor pointers cleared), its
 * edges and input metas filled from record->inputs, numbered next in execution order; one
 * reference, for the output, which the caller attaches. Stops the program when host memory
 * runs out. record->kind is GC_OP_KIND_COUNT for a node no op recorded (a checkpoint). */
gc_node *gc_node_new(const gc_backward_rule *rule, const gc_op_record *record);

/* The rule for a recorded op (rules.c). */
const gc_backward_rule *gc_rule_for(const gc_op_record *record);

/* What `ext` points to on a tensor that autograd knows about. */
#define GC_MAX_HOOKS 4
typedef struct gc_autograd_meta {
    bool requires_grad;
    gc_node *node;             /* the node that produced it; NULL for a leaf */
    gc_tensor *grad;           /* a leaf's accumulated gradient */
    int pending;               /* during backward: contributions still to come */
    bool reached;              /* during backward: a contribution arrived */
    int n_hooks;
    gc_grad_hook hooks[GC_MAX_HOOKS];
    void *hook_data[GC_MAX_HOOKS];
} gc_autograd_meta;

/* The meta of t, or NULL when autograd has never touched it. */
gc_autograd_meta *gc_meta(const gc_tensor *t);
/* The meta of t, created if needed (fatal when host memory runs out: a header). */
gc_autograd_meta *gc_meta_get_or_create(gc_tensor *t);

/* A saved tensor: a new header over t's storage without autograd meta (so that a node
 * saving its own output makes no reference cycle). */
gc_tensor *gc_save_view(const gc_tensor *t);
/* Keeps t (may be NULL) in node->saved[slot]. */
void gc_node_save(gc_node *node, int slot, const gc_tensor *t);

/* A growable array of nodes (used as a stack and as a list). */
typedef struct gc_node_list {
    gc_node **items;
    size_t count, capacity;
} gc_node_list;

/* Appends; stops the program if host memory runs out (a few pointers per node). */
void gc_node_list_push(gc_node_list *list, gc_node *node);

void gc_node_retain(gc_node *node);
/* Releases a reference; frees the node, and iteratively every node only it kept alive. */
void gc_node_release(gc_node *node);
/* Drops what a node holds for backward (grad, saved tensors, edges) and marks it consumed. */
void gc_node_clear(gc_node *node);

/* Whether an op (or a checkpoint) over these inputs is recorded: grad mode is on and an input
 * (entries may be NULL) requires a gradient. */
bool gc_autograd_wants(const gc_tensor *const *inputs, int n_inputs);

/* Installs the op observer (the first gc_set_requires_grad does). */
void gc_autograd_install(void);

#endif
