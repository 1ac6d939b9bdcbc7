/* The bucketer's state, shared by its set-up (ddp_setup.c) and its reduction (ddp.c).
 * Private to dist/. */
#ifndef GC_DIST_DDP_INTERNAL_H
#define GC_DIST_DDP_INTERNAL_H

#include "gradcache/ddp.h"

/* One parameter, in bucket order (reverse registration order). */
typedef struct gc_ddp_slot {
    gc_ddp *ddp;
    gc_tensor *param;  /* retained */
    gc_tensor *view;   /* [param's shape]: its gradient, inside the bucket's buffer */
    const char *name;  /* the param list's (it outlives the bucketer) */
    int bucket;
    bool used;         /* a backward reached it since the last checked reduction */
    bool ready;        /* its gradient is final for the synced backward under way */
} gc_ddp_slot;

typedef struct gc_ddp_bucket {
    gc_tensor *buffer;   /* [numel]: the gradients of its slots, back to back */
    int first, count;    /* its slots: slots[first, first + count) */
    int pending;         /* slots not ready yet in this synced backward */
    gc_dist_work *work;  /* its all-reduce while in flight */
} gc_ddp_bucket;

struct gc_ddp {
    gc_process_group *group;
    gc_ddp_options options;
    bool require_sync;
    gc_ddp_slot *slots;
    int n_slots;
    gc_ddp_bucket *buckets;
    int n_buckets;
    int next_launch;     /* the first bucket not launched in this synced backward */
    gc_ddp_stats stats;
};

/* The set-up steps (ddp_setup.c). */
gc_status gc_ddp_check_params(gc_process_group *group, const gc_param_list *params);
gc_status gc_ddp_broadcast_params(gc_process_group *group, const gc_ddp_slot *slots, int n_slots);
/* Fills ddp->slots (deduplicated, reverse order) and ddp->buckets, allocating the zeroed
 * buffers and installing the views as gradients. */
gc_status gc_ddp_build_buckets(gc_ddp *ddp, const gc_param_list *params);

#endif
