/* Gradient Cache across processes (see "Data-parallel" in gradcache/cache.h): what the step
 * in cache.c asks of the process group -- the global batch for the loss, each rank's share of
 * its gradient, and one gradient reduction per step. Nothing here calls back into cache.c. */
#include <stdlib.h>

#include "cache_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

gc_status gc_cache_gather_leaves(const gc_cache *cache, gc_tensor *const *leaves, gc_tensor **global,
                                 int64_t *own_start) {
    const gc_cache_config *config = &cache->config;
    gc_process_group *group = config->group;
    int n = config->n_models;
    for (int m = 0; m < n; m++) global[m] = NULL, own_start[m] = 0;
    if (!group) {
        for (int m = 0; m < n; m++) global[m] = gc_tensor_retain(leaves[m]);
        return GC_OK;
    }
    int world = gc_dist_world_size(group), rank = gc_dist_rank(group);
    int64_t *counts = malloc((size_t)world * sizeof *counts);
    if (!counts) gc_fatal("cache: out of host memory for %d ranks", world);
    gc_status status = GC_OK;
    for (int m = 0; m < n && status == GC_OK; m++) {
        global[m] = gc_dist_all_gather(group, leaves[m], counts);
        if (!global[m]) {
            status = gc_last_status();
            break;
        }
        for (int r = 0; r < rank; r++) own_start[m] += counts[r];
        gc_set_requires_grad(global[m], true);
    }
    free(counts);
    return status;
}

gc_status gc_cache_own_rows(const gc_cache *cache, gc_tensor *const *global_grads, const int64_t *own_start,
                            gc_tensor *const *leaves, gc_tensor **grads) {
    const gc_cache_config *config = &cache->config;
    int world = config->group ? gc_dist_world_size(config->group) : 1;
    for (int m = 0; m < config->n_models; m++) {
        if (!config->group) {
            grads[m] = gc_tensor_retain(global_grads[m]);
            continue;
        }
        /* scaled by the world size: the bucketer averages the ranks' gradients */
        gc_tensor *slice = gc_slice0(global_grads[m], own_start[m], own_start[m] + leaves[m]->shape[0]);
        grads[m] = gc_mul_scalar(slice, (double)world);
        gc_tensor_release(slice);
        if (!grads[m]) return gc_last_status();
    }
    return GC_OK;
}

gc_status gc_cache_sync_begin(const gc_cache *cache, int64_t backwards, gc_cache_sync *sync) {
    gc_ddp *ddp = cache->config.ddp;
    /* ZeRO-2b reduces every chunk's backward into the shards, so that no bucket outlives it */
    *sync = (gc_cache_sync){.ddp = ddp, .outer = ddp ? gc_ddp_require_sync(ddp) : false,
                            .every = cache->config.sync_every_backward || (ddp && gc_ddp_reduces_every_backward(ddp))};
    if (!sync->ddp || !sync->every || !sync->outer) return GC_OK;
    /* one reduction per backward: every rank must run as many, or the collectives would not
     * match; the max of (n, -n) gives the largest and the smallest count at once */
    gc_process_group *group = cache->config.group;
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

bool gc_cache_sync_before(const gc_cache_sync *sync, bool last, const gc_param_list *reached) {
    if (!sync->ddp) return false;
    /* the caller's setting decides whether this step syncs at all (an outer accumulation) */
    bool synced = sync->outer && (last || sync->every);
    gc_ddp_set_require_sync(sync->ddp, synced);
    /* reducing every backward, each reduces only its own model's gradients: the other models'
     * buckets neither hold its buckets up nor get reduced as zeros */
    if (synced && sync->every && reached) gc_ddp_expect_params(sync->ddp, reached);
    return synced;
}

gc_status gc_cache_sync_after(const gc_cache_sync *sync, bool synced, bool last, gc_status status) {
    if (!synced) return status;
    /* the step's last reduction checks that every parameter got its gradient; one after a
     * local failure is completed all the same, so that the ranks' collectives stay matched */
    gc_status reduced = status == GC_OK && last ? gc_ddp_wait(sync->ddp) : gc_ddp_wait_partial(sync->ddp);
    return status == GC_OK ? reduced : status;
}

void gc_cache_sync_end(const gc_cache_sync *sync) {
    if (sync->ddp) gc_ddp_set_require_sync(sync->ddp, sync->outer);
}
