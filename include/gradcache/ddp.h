/* Data-parallel training: the gradient bucketer.
 *
 * Every rank holds the same parameters and runs backward on its own part of the batch;
 * before the optimizer step, each gradient is averaged over the ranks. Doing that one
 * parameter at a time would launch hundreds of small collectives; doing it once for all
 * gradients after backward would leave the network idle during backward. So, as PyTorch's
 * DDP does, the parameters are grouped into buckets in reverse registration order (the
 * order backward usually finishes them in): the first bucket of 1 MiB, so communication
 * starts early, then 25 MiB each. Each parameter's gradient lives as a view of its bucket's
 * buffer, so reducing a bucket is one all-reduce of that buffer with no copy. During a
 * synced backward, autograd's post-accumulate hook tells the bucketer when a gradient is
 * complete; when every gradient of a bucket is, and the buckets before it have been
 * launched, its all-reduce (an average) starts asynchronously. Buckets are launched in the
 * same order on every rank, which is what keeps the ranks' collectives matched.
 *
 * Sync suppression is explicit: with gc_ddp_set_require_sync(ddp, false), backward only
 * accumulates into the local gradients and nothing is communicated; the next synced
 * backward then reduces the accumulated sum once. Gradient accumulation and Gradient Cache
 * (one backward per chunk, one reduction per step) are built on it.
 *
 * The loop, on every rank:
 *     gc_ddp_zero_grad(ddp);
 *     ... forward, backward (with sync on: the default) ...
 *     if (gc_ddp_wait(ddp) != GC_OK) ... a peer failed ...
 *     ... clip, optimizer step ...
 * gc_ddp_wait must follow every synced backward before the gradients are read or another
 * backward runs: it launches the buckets whose gradients this backward did not reach (their
 * gradients are final too: they came from earlier, unsynced backwards) and waits for every
 * bucket. A backward that reaches a gradient whose bucket is still being reduced is a
 * programmer error. */
#ifndef GRADCACHE_DDP_H
#define GRADCACHE_DDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/dist.h"
#include "gradcache/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_ddp_options {
    size_t first_bucket_bytes;   /* 0: 1 MiB */
    size_t bucket_bytes;         /* 0: 25 MiB */
    /* false: a parameter that no backward reached since the last reduction is an error at
     * gc_ddp_wait (its gradient would silently be stale); true: it is reduced as it is
     * (zero, or what it held) -- for models that use some parameters only some steps. */
    bool find_unused_parameters;
    /* f16 and bf16 gradients: false reduces them in their own dtype (half the bytes on the
     * wire; each addition rounded to the type, and a sum past 65504 is inf in f16 even when
     * the average is not); true widens each half bucket to f32 for the all-reduce and rounds
     * the average once (twice the bytes; what a loss-scaled f16 run near the top of the
     * range needs). Other dtypes are reduced as they are either way. */
    bool reduce_in_f32;
} gc_ddp_options;

typedef struct gc_ddp gc_ddp;

/* Sets up the bucketer for `params` (every rank passes the same list: names, shapes, dtypes
 * and device types are checked across the ranks, NULL with GC_ERR_FORMAT naming the first
 * parameter that differs), broadcasts rank 0's parameter values to every rank, and
 * replaces every gradient by a zeroed view of its bucket. A tensor listed twice (tied
 * models) is bucketed once. options NULL for the defaults. The group must outlive the
 * bucketer. NULL with GC_ERR_PEER or an
 * allocation error otherwise. */
gc_ddp *gc_ddp_new(gc_process_group *group, const gc_param_list *params, const gc_ddp_options *options);
/* Removes the hooks; the gradients stay (views of buffers they keep alive). */
void gc_ddp_free(gc_ddp *ddp);

/* Whether backward reduces the gradients (the default) or only accumulates them; returns
 * the previous setting, so that scopes nest (the role of DDP's no_sync() and of
 * require_backward_grad_sync). Set it the same way on every rank. */
bool gc_ddp_set_require_sync(gc_ddp *ddp, bool require_sync);
bool gc_ddp_require_sync(const gc_ddp *ddp);

/* Gradient accumulation over `count` micro-batches: call before micro-batch `index`'s
 * backward (0-based); sync is on for the last one only. Then gc_ddp_wait as usual. */
void gc_ddp_micro_batch(gc_ddp *ddp, int index, int count);

/* After a synced backward: launches what is left, waits for every bucket, and leaves each
 * gradient averaged over the ranks. A parameter that no backward reached since the last
 * gc_ddp_wait is a programmer error unless find_unused_parameters is set. With sync off it
 * does nothing (there is nothing to wait for). GC_ERR_PEER when a peer failed (the
 * gradients are then unusable). */
gc_status gc_ddp_wait(gc_ddp *ddp);
/* gc_ddp_wait without the unused-parameter check, whose record keeps counting toward the
 * next gc_ddp_wait: for a synced backward that is not the last of a step (Gradient Cache
 * with sync_every_backward), or one that failed on this rank (out of memory, say) -- the
 * reduction is completed all the same, so that this rank's collectives stay matched with
 * the other ranks' (the gradients are then unusable). */
gc_status gc_ddp_wait_partial(gc_ddp *ddp);

/* Zeroes every gradient in place (they stay views of the buckets). gc_zero_grad on a
 * parameter also works, at the cost of a copy into its bucket at the next reduction. */
void gc_ddp_zero_grad(gc_ddp *ddp);

typedef struct gc_ddp_stats {
    int buckets;          /* how many buckets the parameters were grouped into */
    int64_t all_reduces;  /* bucket all-reduces launched so far */
    int64_t bytes;        /* bytes they covered */
    int64_t syncs;        /* synced waits so far */
} gc_ddp_stats;
gc_ddp_stats gc_ddp_get_stats(const gc_ddp *ddp);

#ifdef __cplusplus
}
#endif
#endif
