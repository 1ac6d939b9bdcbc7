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
 * programmer error.
 *
 * ZeRO (gc_ddp_options.zero; docs/DESIGN.md, "ZeRO"): each bucket is cut into world_size
 * contiguous shards, the even split of its elements (rank r owns [offset, offset + count),
 * the first numel % world_size ranks one element more; no padding in the layout -- NCCL pads
 * inside the collective, where its counts must be equal). From stage 1 on, a reduction is a
 * reduce-scatter of the bucket, in place: each rank gets the average of its own shard only,
 * in the bucket's shard gradient (gc_ddp_get_bucket), which a ZeRO optimizer (gradcache/zero.h)
 * updates before it all-gathers the new parameters. The local gradients are then spent:
 * stage 1 zeroes them (a parameter's gradient reads zero after a reduction), stage 2 frees
 * the bucket (the parameter has no gradient until the next backward reaches the bucket). */
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

/* What is sharded over the ranks (DeepSpeed's ZeRO stages). */
typedef enum gc_zero {
    GC_ZERO_0,  /* nothing: every rank holds the averaged gradient and the whole optimizer state */
    GC_ZERO_1,  /* the optimizer state: reductions are reduce-scatters, the full local gradient
                   stays allocated */
    GC_ZERO_2,  /* the gradients too: a bucket's full local gradient exists from the first
                   backward that reaches it to its reduction (variant 2a: with sync suppressed,
                   the whole accumulation -- every chunk of a Gradient Cache step) */
    GC_ZERO_2_EVERY_BACKWARD, /* 2b: every backward reduce-scatters what it produced into the
                   shards, which accumulate; gradient memory is the shards and at most two
                   buckets in flight, at the cost of one reduce-scatter per bucket per backward */
} gc_zero;

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
    gc_zero zero;                /* GC_ZERO_0 (0): the plain bucketer */
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
 * backward (0-based); sync is on for the last one only (on every one with
 * GC_ZERO_2_EVERY_BACKWARD). Then gc_ddp_wait as usual. */
void gc_ddp_micro_batch(gc_ddp *ddp, int index, int count);

/* Announces that the next synced backward reaches the parameters of `params` only (the
 * bucketer's, or some of them; NULL: any, the default, restored by every gc_ddp_wait): the
 * buckets holding none of them are not reduced after it, and the others do not wait for their
 * parameters outside the list. For a synced backward that only adds its own gradients to what
 * the last reduction left -- one model's chunk when every backward is reduced (Gradient Cache
 * announces each model's parameters then) -- this is what lets the buckets be launched and, at
 * ZeRO-2, freed while that backward runs: in bucket order, a bucket of another model would
 * otherwise hold up every bucket after it until gc_ddp_wait, and be reduced as zeros. Every
 * rank must announce the same. Call it before the backward; a backward that reaches a
 * parameter left out stops the program naming it. */
void gc_ddp_expect_params(gc_ddp *ddp, const gc_param_list *params);

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

/* Zeroes every gradient in place (they stay views of the buckets) and, with ZeRO, the shard
 * gradients; ZeRO-2 frees the buckets' local gradients instead. gc_zero_grad on a parameter
 * also works, at the cost of a copy into its bucket at the next reduction. */
void gc_ddp_zero_grad(gc_ddp *ddp);

typedef struct gc_ddp_stats {
    int buckets;          /* how many buckets the parameters were grouped into */
    int64_t all_reduces;  /* bucket reductions launched so far (reduce-scatters with ZeRO) */
    int64_t bytes;        /* bytes they covered */
    int64_t syncs;        /* synced waits so far */
} gc_ddp_stats;
gc_ddp_stats gc_ddp_get_stats(const gc_ddp *ddp);

gc_zero gc_ddp_zero(const gc_ddp *ddp);
/* Whether every synced backward reduces, however the step accumulates (ZeRO-2b): Gradient
 * Cache then syncs every chunk's backward, and gc_ddp_micro_batch every micro-batch. */
bool gc_ddp_reduces_every_backward(const gc_ddp *ddp);
gc_process_group *gc_ddp_group(const gc_ddp *ddp);

/* --- the sharding, for a ZeRO optimizer (gradcache/zero.h) --- */
typedef struct gc_ddp_bucket_info {
    int64_t numel;         /* its elements: the gradients of its parameters, back to back */
    int64_t shard_offset;  /* this rank's shard: elements [shard_offset, shard_offset + shard_count) */
    int64_t shard_count;
    int n_params;          /* its parameters, in bucket order (gc_ddp_bucket_param) */
    gc_tensor *shard_grad; /* [shard_count], the parameters' dtype and device (borrowed): after a
                              reduction, this rank's shard of the averaged gradient (summed over the
                              reductions since gc_ddp_zero_grad) */
} gc_ddp_bucket_info;
/* (At ZeRO-0 every rank's shard is its whole bucket, and its gradient the bucket's buffer.) */
int gc_ddp_bucket_count(const gc_ddp *ddp);
gc_ddp_bucket_info gc_ddp_get_bucket(const gc_ddp *ddp, int bucket);
/* Parameter `index` of a bucket: the bucketer's own entry (the name, tensor and no_decay flag
 * the parameter list gave; a tensor listed twice appears once), and in *offset where its
 * elements start in the bucket. An index out of range is a programmer error. */
const gc_param *gc_ddp_bucket_param(const gc_ddp *ddp, int bucket, int index, int64_t *offset);

#ifdef __cplusplus
}
#endif
#endif
