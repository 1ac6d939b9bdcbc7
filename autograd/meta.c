/* What autograd keeps on a tensor (its `ext`): requires_grad, the producing node, a leaf's
 * gradient and hooks; and the leaf-level API of gradcache/autograd.h. */
#include <stdlib.h>

#include "graph.h"

static void free_meta(void *ext) {
    gc_autograd_meta *meta = ext;
    gc_tensor_release(meta->grad);
    if (meta->node) gc_node_release(meta->node);
    free(meta);
}

gc_autograd_meta *gc_meta(const gc_tensor *t) { return t && t->ext_free == free_meta ? t->ext : NULL; }

gc_autograd_meta *gc_meta_get_or_create(gc_tensor *t) {
    gc_autograd_meta *meta = gc_meta(t);
    if (meta) return meta;
    if (t->ext) gc_fatal("autograd: tensor already carries another layer's extension");
    meta = calloc(1, sizeof *meta);
    if (!meta) gc_fatal("autograd: out of host memory for a tensor's autograd record");
    t->ext = meta;
    t->ext_free = free_meta;
    return meta;
}

void gc_set_requires_grad(gc_tensor *leaf, bool requires_grad) {
    char text[128];
    if (!gc_is_leaf(leaf))
        gc_fatal("set_requires_grad: %s is the output of a recorded op, not a leaf (detach it first)",
                 gc_tensor_str(leaf, text, sizeof text));
    if (requires_grad && !gc_dtype_is_float(leaf->dtype))
        gc_fatal("set_requires_grad: %s is not of a floating dtype", gc_tensor_str(leaf, text, sizeof text));
    if (requires_grad) gc_autograd_install();
    if (requires_grad || gc_meta(leaf)) gc_meta_get_or_create(leaf)->requires_grad = requires_grad;
}

bool gc_requires_grad(const gc_tensor *t) {
    gc_autograd_meta *meta = gc_meta(t);
    return meta && (meta->requires_grad || meta->node);
}

bool gc_is_leaf(const gc_tensor *t) {
    gc_autograd_meta *meta = gc_meta(t);
    return !meta || !meta->node;
}

gc_tensor *gc_grad(const gc_tensor *leaf) {
    gc_autograd_meta *meta = gc_meta(leaf);
    return meta ? meta->grad : NULL;
}

void gc_zero_grad(gc_tensor *leaf) {
    gc_autograd_meta *meta = gc_meta(leaf);
    if (!meta) return;
    gc_tensor_release(meta->grad);
    meta->grad = NULL;
}

void gc_set_grad(gc_tensor *leaf, gc_tensor *grad) {
    char a[128], b[128];
    if (!gc_is_leaf(leaf) || !gc_requires_grad(leaf))
        gc_fatal("set_grad: %s is not a leaf that requires a gradient", gc_tensor_str(leaf, a, sizeof a));
    if (grad && (!gc_same_shape(grad, leaf) || grad->dtype != leaf->dtype || !gc_device_equal(grad->device, leaf->device)))
        gc_fatal("set_grad: a gradient %s for the leaf %s", gc_tensor_str(grad, a, sizeof a),
                 gc_tensor_str(leaf, b, sizeof b));
    gc_autograd_meta *meta = gc_meta(leaf);
    if (grad) gc_tensor_retain(grad);
    gc_tensor_release(meta->grad);
    meta->grad = grad;
}

gc_tensor *gc_save_view(const gc_tensor *t) {
    bool previous = gc_set_grad_enabled(false); /* a reshape to its own shape, not recorded */
    gc_tensor *view = gc_reshape(t, t->ndim, t->shape);
    gc_set_grad_enabled(previous);
    return view;
}

gc_tensor *gc_detach(const gc_tensor *t) { return t ? gc_save_view(t) : NULL; }

void gc_add_post_accumulate_hook(gc_tensor *leaf, gc_grad_hook hook, void *user_data) {
    char text[128];
    if (!gc_is_leaf(leaf) || !gc_requires_grad(leaf))
        gc_fatal("add_post_accumulate_hook: %s is not a leaf that requires a gradient",
                 gc_tensor_str(leaf, text, sizeof text));
    gc_autograd_meta *meta = gc_meta(leaf);
    if (meta->n_hooks == GC_MAX_HOOKS)
        gc_fatal("add_post_accumulate_hook: %s already has %d hooks", gc_tensor_str(leaf, text, sizeof text),
                 GC_MAX_HOOKS);
    meta->hooks[meta->n_hooks] = hook;
    meta->hook_data[meta->n_hooks] = user_data;
    meta->n_hooks++;
}

void gc_remove_post_accumulate_hook(gc_tensor *leaf, gc_grad_hook hook, void *user_data) {
    gc_autograd_meta *meta = gc_meta(leaf);
    if (!meta) return;
    for (int i = 0; i < meta->n_hooks; i++)
        if (meta->hooks[i] == hook && meta->hook_data[i] == user_data) {
            for (int j = i + 1; j < meta->n_hooks; j++) { /* keep the others in registration order */
                meta->hooks[j - 1] = meta->hooks[j];
                meta->hook_data[j - 1] = meta->hook_data[j];
            }
            meta->n_hooks--;
            return;
        }
}
