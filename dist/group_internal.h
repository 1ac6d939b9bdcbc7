/* What a process group and a work are, for the front-end (collectives.c) and the backends
 * (tcp_backend.c, nccl_backend.c). Private to dist/. */
#ifndef GC_DIST_GROUP_INTERNAL_H
#define GC_DIST_GROUP_INTERNAL_H

#include <stdbool.h>

#include "gradcache/dist.h"

typedef enum gc_collective {
    GC_COLLECTIVE_ALL_REDUCE,
    GC_COLLECTIVE_REDUCE_SCATTER,
    GC_COLLECTIVE_ALL_GATHER,
    GC_COLLECTIVE_BROADCAST,
    GC_COLLECTIVE_SHIFT
} gc_collective;

/* One collective in flight. The front-end allocates every tensor on the caller's thread
 * (the allocator is not thread-safe); a backend only reads and writes their bytes. */
struct gc_dist_work {
    gc_process_group *group;
    gc_collective kind;
    gc_dist_op op;
    int root;                 /* broadcast */
    gc_tensor *input;         /* what the backend reads, on its native device */
    gc_tensor *output;        /* what it writes (all_reduce, broadcast: input itself; shift: what
                                 the previous rank sends) */
    gc_tensor *caller_output; /* the caller's tensor, when output is a staged copy of it */
    int64_t *counts;          /* [world] rows per rank (reduce_scatter, all_gather) */
    char what[96];            /* "all_reduce #3 ([1024] f32)", for messages */
    /* set by the backend when the work is over */
    gc_status status;
    char message[512];
    int64_t sent_bytes;       /* what this rank sent to its peers for it */
    bool queued;              /* the backend took it (set by the caller's thread) */
    bool done;                /* set by whoever finished it (under the backend's lock, if any) */
    void *backend_data;
};

typedef struct gc_dist_backend_impl {
    const char *name;
    gc_device_type native; /* tensors on another device are staged through this one */
    /* Starts a work (enqueues it) and returns true; or fails it at once (work->status and
     * work->message) and returns false. A queued work belongs to the backend until wait: the
     * caller's thread must not touch it, since a communication thread may be running it. */
    bool (*start)(gc_process_group *group, gc_dist_work *work);
    /* Completes a queued work: afterwards work->status tells how it went. */
    void (*wait)(gc_process_group *group, gc_dist_work *work);
    void (*destroy)(gc_process_group *group);
} gc_dist_backend_impl;

struct gc_process_group {
    int rank, world;
    double timeout;
    gc_store *store;          /* NULL in a world of one */
    gc_dist_secret secret;    /* the run's: the ring's connections are authenticated with it too */
    gc_device native_device;  /* where the backend's tensors live */
    const gc_dist_backend_impl *impl;
    void *state;              /* the backend's */
    int64_t sequence;         /* collectives started so far */
    gc_dist_stats stats;
};

/* The backends' set-up: fill group->impl, group->state and group->native_device, or return an
 * error (recorded) with nothing left allocated. */
gc_status gc_tcp_backend_init(gc_process_group *group);
gc_status gc_nccl_backend_init(gc_process_group *group, gc_device device);

/* Records a failure on the work (status and message); GC_ERR_PEER breaks nothing by itself. */
void gc_work_fail(gc_dist_work *work, gc_status status, const char *message);

/* The local address the store connection uses: how the other ranks reach this machine. */
void gc_store_local_address(const gc_store *store, char *address, size_t size);

/* Elements of each rank's chunk when `total` elements are split as evenly as possible (the
 * first total % world ranks get one more), and where each chunk starts. */
void gc_even_split(size_t total, int world, size_t *offset, size_t *count);

#endif
