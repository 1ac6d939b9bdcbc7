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
/* The scale a step's gradients carry: the scaler's, or 1 without one. */
double gc_cache_loss_scale(const gc_cache *cache);
/* Step 3 (cache.c): the loss over the leaves, this rank's or, with a process group, every
 * rank's (gathered, or around the ring), and the cache: grads[i] (a new reference) is
 * d loss / d this rank's rows of leaves[i], times the loss scale, and times the world size
 * across processes. *ring (may be NULL) tells whether the loss ran around the ring. */
gc_status gc_cache_loss(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads, bool *ring);

/* --- across processes (distributed.c): what the steps of cache.c and verify.c ask of the
 * process group; each is the identity (or nothing) without one --- */

/* How step 3's loss sees the global batch. */
typedef struct gc_cache_exchange {
    bool ring;                                /* the loss's own ring over this rank's rows */
    int64_t own_start[GC_CACHE_MAX_MODELS];   /* this rank's first row in global[m] */
} gc_cache_exchange;

/* The global batch of each model, as config.global_loss decides: every rank's leaves[m]
 * gathered in rank order into global[m] (a new reference, requiring a gradient), this rank's
 * rows starting at own_start[m]; or, for the ring (and without a group), global[m] is
 * leaves[m] itself (retained), own_start 0. */
gc_status gc_cache_global_batch(const gc_cache *cache, gc_tensor *const *leaves, gc_tensor **global,
                                gc_cache_exchange *exchange);
/* This rank's rows of each global gradient: grads[m] = global_grads[m] rows [own_start[m],
 * + rows of leaves[m]) times the world size (the bucketer averages over the ranks). Without a
 * group, global_grads[m] itself (retained). */
gc_status gc_cache_own_rows(const gc_cache *cache, gc_tensor *const *global_grads, const int64_t *own_start,
                            gc_tensor *const *leaves, gc_tensor **grads);

/* The bucketer's sync over the backwards of one step, chunks[m] of model m: only the step's
 * last one reduces -- or every one, with sync_every_backward or ZeRO-2b, and then every rank
 * runs as many reductions of each model as the rank with the most chunks of it: one with fewer
 * takes part in the rest with empty contributions (gc_cache_sync_pad). Without a bucketer
 * every call does nothing. */
typedef struct gc_cache_sync {
    gc_ddp *ddp;  /* NULL: nothing to do */
    bool outer;   /* the caller's setting before the step, restored after it */
    bool every;   /* sync_every_backward, or a bucketer that reduces every backward (ZeRO-2b) */
    int64_t rounds[GC_CACHE_MAX_MODELS]; /* backwards of model m this step: its chunks, or with
                                            `every` the most any rank has */
    int last_model; /* the last model with a round: its last round is the step's last */
} gc_cache_sync;
gc_status gc_cache_sync_begin(const gc_cache *cache, const int64_t *chunks, gc_cache_sync *sync);
/* Sets the sync of model m's backward of chunk c, which reaches the parameters `reached` (the
 * model's; NULL: unknown); returns whether it is synced. */
bool gc_cache_sync_before(const gc_cache_sync *sync, int m, int64_t c, const gc_param_list *reached);
/* After that backward, given its status: a synced backward's reduction is waited for. */
gc_status gc_cache_sync_after(const gc_cache_sync *sync, bool synced, int m, int64_t c, gc_status status);
/* After model m's `chunks` backwards: the rounds other ranks still run for it, with nothing of
 * this rank's (its parameters' buckets reduced as zeros), so that the collectives match. */
gc_status gc_cache_sync_pad(const gc_cache_sync *sync, int m, int64_t chunks, const gc_param_list *reached);
void gc_cache_sync_end(const gc_cache_sync *sync);

/* --- automatic chunk sizing across processes (auto_chunk_group.c); without auto_chunk or a
 * group of several ranks each returns `status` and does nothing --- */

/* Every rank's `status` at a point every rank reaches: GC_OK when all are; else this rank's
 * own failure, or GC_ERR_MEM_LIMIT (GC_ERR_PEER) naming the rank that ran out of memory
 * (failed otherwise; a rank out of memory then gets GC_ERR_PEER too), so that every rank
 * retries with smaller chunks, or none does. */
gc_status gc_cache_agree(const gc_cache *cache, gc_status status);
/* After this rank failed in model m's backwards (`status`), the backward of chunk next_chunk - 1
 * synced: the reductions the other ranks still run for model m's later chunks and the later
 * models, with nothing of this rank's, so that the collectives match. Returns `status`. */
gc_status gc_cache_sync_abandon(const gc_cache *cache, const gc_cache_sync *sync, int m, int64_t next_chunk,
                                gc_status status);

#endif
