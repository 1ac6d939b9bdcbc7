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

#ifdef __cplusplus
}
#endif
#endif
