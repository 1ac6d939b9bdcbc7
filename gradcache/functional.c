/* The functional API: a cached forward returning a representation leaf and a closure that
 * later replays the RNG and runs the forward + backward (see gradcache/cache.h). */
#include <stdlib.h>

#include "cache_internal.h"
#include "gradcache/autograd.h"

struct gc_closure {
    void *model;
    gc_model_fn forward;
    gc_representation_fn representation;
    void *user;
    gc_batch input;          /* the caller's tensors, retained: they must not change */
    gc_rng_context context;  /* every device's RNG state before the first forward */
};

gc_tensor *gc_cached_forward(void *model, gc_model_fn forward, const gc_batch *input,
                             gc_representation_fn representation, void *user, gc_closure **closure) {
    *closure = NULL;
    gc_rng_context context = gc_rng_capture();
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *rep = gc_cache_representation(model, forward, input, representation, user);
    gc_set_grad_enabled(previous);
    if (!rep) return NULL;
    gc_set_requires_grad(rep, true); /* made without a graph, so a leaf */
    gc_closure *made = malloc(sizeof *made);
    if (!made) gc_fatal("cached_forward: out of host memory for a closure");
    *made = (gc_closure){model, forward, representation, user, *input, context};
    for (int i = 0; i < input->count; i++) gc_tensor_retain(made->input.tensors[i]);
    *closure = made;
    return rep;
}

gc_status gc_closure_run(gc_closure *closure, const gc_tensor *representation_leaf) {
    gc_tensor *seed = gc_grad(representation_leaf);
    if (!seed) gc_fatal("closure_run: the representation has no gradient: run the loss's backward first");
    gc_rng_context saved = gc_rng_replay_begin(&closure->context);
    gc_tensor *rep = gc_cache_representation(closure->model, closure->forward, &closure->input,
                                             closure->representation, closure->user);
    gc_rng_replay_end(&saved);
    if (!rep) return gc_last_status();
    gc_status status = gc_backward(&rep, &seed, 1);
    gc_tensor_release(rep);
    return status;
}

void gc_closure_free(gc_closure *closure) {
    if (!closure) return;
    for (int i = 0; i < closure->input.count; i++) gc_tensor_release(closure->input.tensors[i]);
    free(closure);
}
