/* The functional API: a cached forward returning a representation leaf and a closure that
 * later replays the RNG and runs the forward + backward; under data parallelism, the loss over
 * every rank's representations and the closures' one reduction (see gradcache/cache.h). */
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
    return gc_closure_run_seeded(closure, seed);
}

gc_status gc_closure_run_seeded(gc_closure *closure, const gc_tensor *grad) {
    gc_tensor *seed = (gc_tensor *)grad; /* gc_backward reads the seed only */
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

gc_status gc_functional_loss(const gc_loss_fn *loss, gc_process_group *group, const gc_loss_scaler *scaler,
                             gc_tensor *const *reps, int count, double *value, gc_tensor **grads) {
    if (!loss || !loss->forward || count < 1 || count > GC_CACHE_MAX_MODELS)
        gc_fatal("functional_loss: a loss with a forward and 1 to %d representations, got %d", GC_CACHE_MAX_MODELS,
                 count);
    /* the cached step's loss phase (cache.c, distributed.c), over a cache of no models' own */
    struct gc_cache cache = {.config = {.n_models = count, .loss = *loss, .group = group, .scaler = scaler}};
    gc_tensor *leaves[GC_CACHE_MAX_MODELS];
    for (int m = 0; m < count; m++) {
        leaves[m] = gc_detach(reps[m]); /* leaves of their own: the caller's are left alone */
        gc_set_requires_grad(leaves[m], true);
    }
    gc_status status = gc_cache_loss(&cache, leaves, value, grads, NULL);
    for (int m = 0; m < count; m++) gc_tensor_release(leaves[m]);
    return status;
}

gc_status gc_closures_run(gc_closure *const *closures, gc_tensor *const *grads, int n, gc_ddp *ddp) {
    gc_status status = GC_OK;
    for (int i = 0; i < n && status == GC_OK; i++) {
        if (ddp) gc_ddp_micro_batch(ddp, i, n); /* only the last backward reduces */
        status = gc_closure_run_seeded(closures[i], grads[i]);
    }
    return status == GC_OK && ddp && n > 0 ? gc_ddp_wait(ddp) : status;
}
