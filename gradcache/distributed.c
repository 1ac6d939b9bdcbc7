/* Gradient Cache across processes: the loss over the global batch, and one gradient
 * reduction per step (see "Data-parallel" in gradcache/cache.h). */
#include <stdlib.h>

#include "cache_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

/* d loss / d (this rank's rows), scaled by the world size: the slice [start, start + rows)
 * of the global gradient. A new reference; NULL on an allocation error. */
static gc_tensor *own_rows(const gc_tensor *global_grad, int64_t start, int64_t rows, int world) {
    gc_tensor *slice = gc_slice0(global_grad, start, start + rows);
    gc_tensor *scaled = gc_mul_scalar(slice, (double)world);
    gc_tensor_release(slice);
    return scaled;
}

static gc_status global_loss(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads) {
    const gc_cache_config *config = &cache->config;
    gc_process_group *group = config->group;
    int world = gc_dist_world_size(group), rank = gc_dist_rank(group), n = config->n_models;
    int64_t *counts = malloc((size_t)world * sizeof *counts);
    if (!counts) gc_fatal("cache: out of host memory for %d ranks", world);
    gc_tensor *global[GC_CACHE_MAX_MODELS] = {0}, *global_grads[GC_CACHE_MAX_MODELS] = {0};
    int64_t starts[GC_CACHE_MAX_MODELS] = {0};
    gc_status status = GC_OK;
    for (int m = 0; m < n && status == GC_OK; m++) {
        global[m] = gc_dist_all_gather(group, leaves[m], counts);
        if (!global[m]) status = gc_last_status();
        for (int r = 0; r < rank; r++) starts[m] += counts[r];
        if (global[m]) gc_set_requires_grad(global[m], true);
    }
    if (status == GC_OK) status = gc_cache_loss_and_cache(cache, global, loss, global_grads);
    for (int m = 0; m < n && status == GC_OK; m++) {
        grads[m] = own_rows(global_grads[m], starts[m], leaves[m]->shape[0], world);
        if (!grads[m]) status = gc_last_status();
    }
    for (int m = 0; m < n; m++) {
        gc_tensor_release(global[m]);
        gc_tensor_release(global_grads[m]);
    }
    free(counts);
    return status;
}

gc_status gc_cache_loss(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads) {
    if (!cache->config.group) return gc_cache_loss_and_cache(cache, leaves, loss, grads);
    return global_loss(cache, leaves, loss, grads);
}

gc_cache_sync gc_cache_sync_begin(const gc_cache *cache) {
    gc_ddp *ddp = cache->config.ddp;
    return (gc_cache_sync){.ddp = ddp, .outer = ddp ? gc_ddp_require_sync(ddp) : false,
                           .every = cache->config.sync_every_backward};
}

bool gc_cache_sync_before(const gc_cache_sync *sync, bool last) {
    if (!sync->ddp) return false;
    /* the caller's setting decides whether this step syncs at all (an outer accumulation) */
    bool synced = sync->outer && (last || sync->every);
    gc_ddp_set_require_sync(sync->ddp, synced);
    return synced;
}

gc_status gc_cache_sync_after(const gc_cache_sync *sync, bool synced, bool last, gc_status status) {
    if (!synced) return status;
    /* the step's last reduction checks that every parameter got its gradient; one after a
     * local failure is completed all the same, so that the ranks' collectives stay matched */
    gc_status reduced = status == GC_OK && last ? gc_ddp_wait(sync->ddp) : gc_ddp_wait_partial(sync->ddp);
    return status == GC_OK ? reduced : status;
}

gc_status gc_cache_sync_check(const gc_cache_sync *sync, gc_process_group *group, int64_t backwards) {
    if (!sync->ddp || !sync->every || !sync->outer) return GC_OK;
    /* one reduction per backward: every rank must run as many, or the collectives would not
     * match; the max of (n, -n) gives the largest and the smallest count at once */
    double both[2] = {(double)backwards, -(double)backwards};
    gc_tensor *counts = gc_from_host(both, GC_SHAPE(2), GC_F64, gc_cpu());
    gc_status status = counts ? gc_dist_all_reduce(group, counts, GC_DIST_MAX) : gc_last_status();
    if (status == GC_OK) {
        const double *range = gc_data(counts);
        if (range[0] != (double)backwards || -range[1] != (double)backwards)
            gc_fatal("cache: sync_every_backward needs as many chunks on every rank (rank %d has %lld backwards, "
                     "the ranks %g to %g)",
                     gc_dist_rank(group), (long long)backwards, -range[1], range[0]);
    }
    gc_tensor_release(counts);
    return status;
}

void gc_cache_sync_end(const gc_cache_sync *sync) {
    if (sync->ddp) gc_ddp_set_require_sync(sync->ddp, sync->outer);
}
