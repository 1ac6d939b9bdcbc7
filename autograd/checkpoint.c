/* Activation checkpointing (gradcache/autograd.h): a node that keeps a function's inputs
 * instead of its intermediates, and in backward recomputes the function with a graph and runs
 * a backward of its own through it. The nested gc_backward is safe: a backward's state is its
 * own list of nodes, and the leaves' pending counts only ever go up and back down within it. */
#include <stdlib.h>
#include <string.h>

#include "rules.h"

#define MAX_INPUTS 8

typedef struct checkpoint {
    gc_checkpoint_fn fn;
    int count;
    gc_tensor *inputs[MAX_INPUTS]; /* views of the inputs (NULL where the input was) */
    gc_input_meta output;          /* what the recompute must give again */
    void *state;                   /* state_size bytes, fn's to read */
} checkpoint;

static void free_checkpoint(void *extra) {
    checkpoint *c = extra;
    for (int i = 0; i < c->count; i++) gc_tensor_release(c->inputs[i]);
    free(c->state);
    free(c);
}

static void check_recomputed(const gc_node *node, const checkpoint *c, const gc_tensor *y) {
    const gc_input_meta *o = &c->output;
    bool same = y->ndim == o->ndim && y->dtype == o->dtype && gc_device_equal(y->device, o->device);
    for (int d = 0; same && d < o->ndim; d++) same = y->shape[d] == o->shape[d];
    char was[96], now[128];
    if (!same)
        gc_fatal("checkpoint #%llu: the recompute gave %s, the forward %s %s", (unsigned long long)node->sequence,
                 gc_tensor_str(y, now, sizeof now), gc_shape_str(o->ndim, o->shape, was, sizeof was),
                 gc_dtype_name(o->dtype));
}

/* inputs' are new leaves over the kept storage, so that the sub-graph ends at them and their
 * gradients are what flows on to the inputs' own nodes. */
static bool backward_checkpoint(gc_node *node, gc_tensor *grad_out, gc_tensor **grad_inputs) {
    checkpoint *c = node->extra;
    gc_tensor *inputs[MAX_INPUTS] = {0};
    for (int i = 0; i < c->count; i++) {
        if (!gc_rule_needs(node, i)) {
            inputs[i] = c->inputs[i] ? gc_tensor_retain(c->inputs[i]) : NULL;
            continue;
        }
        inputs[i] = gc_detach(c->inputs[i]);
        gc_set_requires_grad(inputs[i], true);
    }
    bool previous = gc_set_grad_enabled(true);
    gc_tensor *y = c->fn(inputs, c->count, c->state, true);
    gc_set_grad_enabled(previous);
    bool ok = y != NULL;
    if (ok) check_recomputed(node, c, y);
    /* an output no input reaches passes nothing back (fn ignored the inputs that need it) */
    if (ok && gc_requires_grad(y)) ok = gc_backward(&y, &grad_out, 1) == GC_OK;
    for (int i = 0; i < c->count; i++) {
        gc_tensor *grad = ok && gc_rule_needs(node, i) ? gc_grad(inputs[i]) : NULL;
        grad_inputs[i] = grad ? gc_tensor_retain(grad) : NULL;
        gc_tensor_release(inputs[i]);
    }
    gc_tensor_release(y);
    return ok;
}

static const gc_backward_rule rule_checkpoint = {"checkpoint", NULL, backward_checkpoint};

gc_tensor *gc_checkpoint(gc_checkpoint_fn fn, const void *state, size_t state_size, gc_tensor *const *inputs,
                         int count) {
    if (!fn || count < 1 || count > MAX_INPUTS || (state_size && !state))
        gc_fatal("checkpoint: needs a function, 1 to %d inputs and a state for its %zu bytes, got %s, %d inputs, %s",
                 MAX_INPUTS, state_size, fn ? "a function" : "none", count, state ? "a state" : "no state");
    if (!gc_autograd_wants((const gc_tensor *const *)inputs, count)) return fn(inputs, count, state, false);
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *y = fn(inputs, count, state, false);
    gc_set_grad_enabled(previous);
    if (!y) return NULL;
    if (gc_meta(y)) { /* an input (or a tensor of another graph) returned as is: the node goes on a view */
        gc_tensor *view = gc_detach(y);
        gc_tensor_release(y);
        y = view;
    }
    checkpoint *c = malloc(sizeof *c);
    void *copy = malloc(state_size ? state_size : 1);
    if (!c || !copy) gc_fatal("checkpoint: out of host memory for a node's %zu bytes of state", state_size);
    if (state_size) memcpy(copy, state, state_size);
    *c = (checkpoint){.fn = fn, .count = count, .state = copy,
                      .output = {.ndim = y->ndim, .dtype = y->dtype, .device = y->device}};
    for (int d = 0; d < y->ndim; d++) c->output.shape[d] = y->shape[d];
    for (int i = 0; i < count; i++) c->inputs[i] = inputs[i] ? gc_save_view(inputs[i]) : NULL;
    gc_node *node = gc_node_new(&rule_checkpoint,
                                &(gc_op_record){.kind = GC_OP_KIND_COUNT, .n_inputs = count,
                                                .inputs = (const gc_tensor *const *)inputs, .output = y});
    node->extra = c;
    node->free_extra = free_checkpoint;
    gc_meta_get_or_create(y)->node = node;
    return y;
}
