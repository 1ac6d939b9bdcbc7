/* The bucketer's state, shared by its set-up (ddp_setup.c), its reduction (ddp.c) and ZeRO's
 * shards (ddp_zero.c). Private to dist/. */
#ifndef GC_DIST_DDP_INTERNAL_H
#define GC_DIST_DDP_INTERNAL_H

#include "gradcache/ddp.h"

/* One parameter, in bucket order (reverse registration order). */
typedef struct gc_ddp_slot {
    gc_ddp *ddp;
    gc_tensor *param;  /* retained */
    gc_tensor *view;   /* [param's shape]: its gradient, inside the bucket's buffer (ZeRO-2: NULL
                        * while the bucket has no buffer) */
    const char *name;  /* the bucketer's own entry's (ddp->params) */
    int64_t offset;    /* where its elements start in the bucket */
    int bucket;
    bool used;         /* a backward reached it since the last checked reduction */
    bool ready;        /* its gradient is final for the synced backward under way */
    bool expected;     /* the synced backward under way may reach it (gc_ddp_expect_params) */
} gc_ddp_slot;

typedef struct gc_ddp_bucket {
    gc_tensor *buffer;   /* [numel]: the local gradients of its slots, back to back (ZeRO-2: NULL
                          * from its reduction until a backward reaches it again) */
    gc_tensor *wide;     /* [numel] f32: with reduce_in_f32, a half buffer widened for the
                          * reduction in flight; NULL otherwise */
    gc_tensor *shard;    /* ZeRO >= 1: [shard_count], this rank's part of the reduced gradient */
    bool shard_fresh;    /* nothing reduced into the shard since it was zeroed: the next reduction
                          * is copied into it (bit for bit what an all-reduce gives), later ones added */
    int64_t numel, shard_offset, shard_count;
    int first, count;    /* its slots: slots[first, first + count) */
    int pending;         /* slots not ready yet in this synced backward */
    bool skipped;        /* this synced backward reaches none of its slots: it is not reduced */
    gc_dist_work *work;  /* its reduction while in flight */
} gc_ddp_bucket;

struct gc_ddp {
    gc_process_group *group;
    gc_ddp_options options;
    gc_param_list params; /* its own entries, one per slot, in slot order */
    bool require_sync;
    gc_ddp_slot *slots;
    int n_slots;
    gc_ddp_bucket *buckets;
    int n_buckets;
    int next_launch;     /* the first bucket not launched in this synced backward */
    gc_status failure;   /* the first error of a hook (which cannot return one), for gc_ddp_wait */
    gc_ddp_stats stats;
};

/* The set-up steps (ddp_setup.c). */
gc_status gc_ddp_check_params(gc_process_group *group, const gc_param_list *params);
gc_status gc_ddp_broadcast_params(gc_process_group *group, const gc_ddp_slot *slots, int n_slots);
/* Fills ddp->slots (deduplicated, reverse order), ddp->params and ddp->buckets, allocating the
 * zeroed buffers (not at ZeRO-2) and shards and installing the views as gradients. */
gc_status gc_ddp_build_buckets(gc_ddp *ddp, const gc_param_list *params);
/* The bucket's zeroed buffer (counted as gradients), each slot's gradient a view of it: the
 * gradient a slot had is dropped, or with keep_gradients copied into its view. */
gc_status gc_ddp_allocate_buffer(gc_ddp *ddp, gc_ddp_bucket *bucket, bool keep_gradients);

/* Makes the slot's gradient the view of its bucket again, if something replaced it (a
 * gc_zero_grad, a user's own tensor, a gradient autograd made before the bucket had a buffer):
 * the bucket is what gets reduced (ddp.c). */
gc_status gc_ddp_restore_view(gc_ddp_slot *slot);

/* --- ZeRO's shards (ddp_zero.c) --- */
bool gc_ddp_sharded(const gc_ddp *ddp);
/* Stage 1 and 2: each bucket's zeroed shard (counted as gradients). */
gc_status gc_ddp_zero_allocate_shards(gc_ddp *ddp);
/* The bucket's reduction: an in-place reduce-scatter of `reduced` (the buffer, or its f32
 * copy) into this rank's shard of it (an average). */
gc_dist_work *gc_ddp_zero_launch(gc_ddp *ddp, gc_ddp_bucket *bucket, gc_tensor *reduced);
/* After it, given its status: the reduced shard (rounded back from the f32 copy) copied or
 * added into bucket->shard, and the local gradient spent (stage 1: zeroed; stage 2: freed).
 * Returns the first error. */
gc_status gc_ddp_zero_retire(gc_ddp *ddp, gc_ddp_bucket *bucket, gc_status done);
/* Stage 2, before bucket `launching` is launched: while two buckets are in flight, the oldest
 * is waited for and retired, so that buffers are freed as backward goes on. */
gc_status gc_ddp_zero_bound_in_flight(gc_ddp *ddp, int launching);
/* Zeroed shards: the next reductions are copied into them. */
void gc_ddp_zero_reset(gc_ddp *ddp);
/* Stage 2: the bucket's buffer freed, its views released, no parameter left holding one. */
void gc_ddp_zero_free_buffer(gc_ddp *ddp, gc_ddp_bucket *bucket);

#endif
