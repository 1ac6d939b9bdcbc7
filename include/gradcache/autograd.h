/* Reverse-mode automatic differentiation.
 *
 * Mark leaves (parameters, or GradCache's representations) with gc_set_requires_grad().
 * From then on, while grad mode is on, every differentiable op whose inputs need a
 * gradient records a node: its backward rule, the tensors that rule needs (saved), and
 * edges to the nodes (or leaves) its inputs came from. Nodes are numbered in execution
 * order; gc_backward() walks the ones reachable from its outputs in reverse order,
 * iteratively, and releases each node's saved tensors as soon as it has run.
 *
 * The graph lives exactly as long as the tensors that reference it: a node is owned by its
 * output tensor and by the nodes downstream of it. Under no-grad nothing is recorded, so an
 * intermediate is freed as soon as its last reference is released.
 *
 * Gradients are not differentiable in turn (no double backward): rules run in no-grad mode.
 */
#ifndef GRADCACHE_AUTOGRAD_H
#define GRADCACHE_AUTOGRAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- grad mode (per thread, on by default) ---
 * Returns the previous mode, so that scopes nest:
 *     bool previous = gc_set_grad_enabled(false);
 *     ... forward without a graph ...
 *     gc_set_grad_enabled(previous);                                                      */
bool gc_set_grad_enabled(bool enabled);
bool gc_grad_enabled(void);

/* --- leaves --- */
/* Only a leaf (a tensor no recorded op produced) of a floating dtype can require a grad. */
void gc_set_requires_grad(gc_tensor *leaf, bool requires_grad);
/* True for a leaf that requires a grad and for every recorded op's output. */
bool gc_requires_grad(const gc_tensor *t);
bool gc_is_leaf(const gc_tensor *t);
/* The accumulated gradient of a leaf (same shape, dtype, device), or NULL before any
 * backward reached it. Borrowed: valid until gc_zero_grad or the leaf's release. */
gc_tensor *gc_grad(const gc_tensor *leaf);
/* Drops the leaf's gradient (the next backward starts from nothing). */
void gc_zero_grad(gc_tensor *leaf);
/* Makes `grad` (the leaf's shape, dtype and device; retained) the leaf's gradient, or drops
 * it for NULL. Backward adds into an existing gradient in place, so a view of a larger
 * buffer stays one: that is how the data-parallel bucketer keeps gradients inside the
 * buffers it reduces, with no copy. */
void gc_set_grad(gc_tensor *leaf, gc_tensor *grad);
/* A new tensor sharing t's storage, outside any graph (a leaf that does not require grad). */
gc_tensor *gc_detach(const gc_tensor *t);

/* --- hooks ---
 * Called once per backward for a leaf, right after its gradient for that backward is
 * complete (every contribution has been added to gc_grad(leaf)), in registration order.
 * A leaf that no gradient reached in a backward gets no call. At most 4 hooks per leaf. */
typedef void (*gc_grad_hook)(gc_tensor *leaf, void *user_data);
void gc_add_post_accumulate_hook(gc_tensor *leaf, gc_grad_hook hook, void *user_data);
/* Removes the hook added with the same function and user_data (a no-op if there is none). */
void gc_remove_post_accumulate_hook(gc_tensor *leaf, gc_grad_hook hook, void *user_data);

/* --- backward ---
 * Back-propagates seeds[i] (d loss / d outputs[i], same shape, dtype and device) from each
 * outputs[i], adding the result into the .grad of every leaf reached. A NULL seeds array
 * or entry means 1 for an output of one element. The graph walked is consumed: running
 * backward through it again is a programmer error. Returns GC_OK, or an allocation error
 * after releasing the whole graph (leaf gradients may then hold a partial sum: zero them
 * before retrying). */
gc_status gc_backward(gc_tensor *const *outputs, gc_tensor *const *seeds, int count);

/* --- activation checkpointing: keep a function's inputs, recompute it in backward ---
 * gc_checkpoint(fn, state, inputs, count) returns fn(inputs, count, state, false), computed
 * without a graph, so that none of fn's intermediates stay alive. When grad mode is on and
 * an input requires a gradient, the output instead gets one graph node that keeps only the
 * inputs (views of them), fn and a copy of state_size bytes of state; gc_backward reaching
 * it calls fn(inputs', count, state, true) with grad mode on, on inputs' that are new leaves
 * over the same storage (requiring a gradient where the input does), back-propagates the
 * incoming gradient through that sub-graph -- adding into the parameters fn uses, as any
 * backward does -- hands the inputs' gradients on, and frees the sub-graph. Memory falls from
 * everything fn saves for backward to its inputs, at the cost of a second forward of fn.
 *
 * fn must compute the same function both times (given recompute, it replays whatever random
 * state it drew from: a dropout layer's generator, gradcache/rng.h) and read tensors only
 * through inputs and parameters (returning an input itself is allowed: the output is then a
 * new view of it). A recomputed output of another shape, dtype or device stops the program. A
 * parameter fn uses must not also be used outside it, nor by a second checkpoint, in the same
 * graph: each nested backward fires the post-accumulate hooks when its own contributions are
 * in, before the others arrive (the data-parallel bucketer then stops the program naming the
 * parameter, or reduces after the last). Inputs: 1 to 8 (an entry may be
 * NULL). NULL when fn fails (with its error); a failure of the recompute fails the backward. */
typedef gc_tensor *(*gc_checkpoint_fn)(gc_tensor *const *inputs /* [count] */, int count, const void *state,
                                       bool recompute);
gc_tensor *gc_checkpoint(gc_checkpoint_fn fn, const void *state, size_t state_size, gc_tensor *const *inputs,
                         int count);

/* --- the graph as a picture ---
 * Writes the graph reachable from outputs[0..count) as Graphviz DOT (`dot -Tsvg FILE`): a box
 * per recorded op (its name, its place in execution order, and the bytes it saved for
 * backward, or that they were released when a backward has run through it), an ellipse per
 * leaf that requires a gradient (shape, dtype, device, and its gradient when it has one),
 * the outputs, and an arrow per input that carries a gradient, labelled with the input's
 * shape, dtype and device. Nothing of the graph changes. GC_OK, or GC_ERR_IO when a write
 * fails. */
gc_status gc_autograd_write_dot(FILE *out, gc_tensor *const *outputs, int count);
/* The same graph as one cluster of a larger picture, framed and titled `label`, its names
 * prefixed with `id` (letters, digits and '_', unique in the file): write
 * "digraph NAME {\n", any number of clusters, then "}\n" (`gradcache verify --dot` draws a
 * plain step's graphs beside a cached step's this way). */
gc_status gc_autograd_write_dot_cluster(FILE *out, const char *id, const char *label, gc_tensor *const *outputs,
                                        int count);

/* --- gradient checking: backward against central differences ---
 * For f (a function of leaves it reads from `context`) and a fixed random weight w of its
 * output's shape, L = sum(f() * w) has dL/dleaf = the vector-Jacobian product of f with w:
 * what gc_backward(f(), seed = w) computes. Each element x of each leaf is then nudged by
 * +-step and (L(x + step) - L(x - step)) / (2 step) compared with it. Leaves are f64 CPU
 * leaves that require a gradient (in f64 with step 1e-6 the truncation error is O(step^2),
 * the rounding error ~ 1e-16 |L| / step: agreement within 1e-7 + 1e-6 |analytic| catches any
 * wrong rule, which errs by O(1), and never fails a right one). f must be smooth at the
 * inputs (keep clear of relu's kink and of ties in a max), and deterministic (dropout with a
 * fixed seed and offset). A leaf f does not depend on has gradient 0 both ways. */
typedef gc_tensor *(*gc_gradcheck_fn)(void *context);

typedef struct gc_gradcheck_options {
    double step;     /* 0: 1e-6 */
    double atol;     /* an element passes when |analytic - numeric| <= atol + rtol |analytic|; */
    double rtol;     /* both 0: 1e-7 and 1e-6 */
    int64_t stride;  /* check every stride-th element of each leaf; 0: every one */
    uint64_t seed;   /* of w, uniform in [-1, 1) */
} gc_gradcheck_options;

typedef struct gc_gradcheck_report {
    int64_t checked, failed;  /* elements */
    /* the element furthest outside its tolerance (or, when all pass, closest to it) */
    int worst_leaf;           /* an index into leaves */
    int64_t worst_index;      /* its flat index */
    double worst_analytic, worst_numeric;
} gc_gradcheck_report;

/* Runs the check over leaves[0..count) (their gradients are replaced); options NULL for the
 * defaults. GC_OK with the report filled (report->failed == 0 when backward agrees), or an
 * allocation error from f or backward. A leaf that is not an f64 CPU leaf requiring a
 * gradient, or an f that returns NULL without an error, stops the program. */
gc_status gc_gradcheck(gc_gradcheck_fn f, void *context, gc_tensor *const *leaves, int count,
                       const gc_gradcheck_options *options, gc_gradcheck_report *report);

#ifdef __cplusplus
}
#endif
#endif
