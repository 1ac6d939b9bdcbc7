/* What the cache's files share. */
#ifndef GC_GRADCACHE_CACHE_INTERNAL_H
#define GC_GRADCACHE_CACHE_INTERNAL_H

#include "gradcache/cache.h"

struct gc_cache {
    gc_cache_config config; /* chunk sizes updated by automatic sizing */
};

/* The representation of `model` for `input`: forward, then the representation function. */
gc_tensor *gc_cache_representation(void *model, gc_model_fn forward, const gc_batch *input,
                                   gc_representation_fn representation, void *user);
/* Model m's representation of the whole input with one graph: its forwards chunk by chunk
 * (so dropout draws exactly the masks of the cached step), concatenated with grad on. */
gc_tensor *gc_cache_forward_with_graph(const gc_cache *cache, int m, const gc_batch *input);
/* Back-propagates `seed` from `output` with the configured backward (or gc_backward). */
gc_status gc_cache_backward(gc_backward_fn backward, gc_tensor *output, gc_tensor *seed, void *user);
/* The loss over the leaves, and d loss / d leaf into grads[i] (new references). */
gc_status gc_cache_loss_and_cache(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads);

/* --- across processes (distributed.c) --- */
/* gc_cache_loss_and_cache over this rank's leaves, or with a group over every rank's:
 * grads[i] is then d global loss / d this rank's rows, times the world size. */
gc_status gc_cache_loss(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads);

/* The bucketer's sync over the backwards of one step. */
typedef struct gc_cache_sync {
    gc_ddp *ddp;  /* NULL: nothing to do */
    bool outer;   /* the caller's setting before the step, restored after it */
    bool every;   /* sync_every_backward */
} gc_cache_sync;
gc_cache_sync gc_cache_sync_begin(const gc_cache *cache);
/* Sets the sync of the next backward (the step's last one when `last`); returns whether it
 * is synced. */
bool gc_cache_sync_before(const gc_cache_sync *sync, bool last);
/* After that backward, given its status: a synced backward's reduction is waited for. */
gc_status gc_cache_sync_after(const gc_cache_sync *sync, bool synced, bool last, gc_status status);
/* With sync_every_backward: checks that every rank runs `backwards` backwards in this step
 * (a mismatch is a programmer error). */
gc_status gc_cache_sync_check(const gc_cache_sync *sync, gc_process_group *group, int64_t backwards);
void gc_cache_sync_end(const gc_cache_sync *sync);

#endif
