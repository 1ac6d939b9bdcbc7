/* Gradient Cache across processes (see "Data-parallel" in gradcache/cache.h): what the step
 * in cache.c asks of the process group -- the global batch for the loss (gathered, or left to
 * the loss's ring), each rank's share of its gradient, and one gradient reduction per step.
 * Nothing here calls back into cache.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/memory.h"
#include "gradcache/ops.h"

/* What each rank tells the others before the gather: its rows of every model, and the memory
 * its representations' device allows (all 8-byte numbers: no padding travels). */
typedef struct rank_rows {
    int64_t rows[GC_CACHE_MAX_MODELS];
    double limit; /* bytes */
} rank_rows;

/* The memory limit of the device, or its memory without one. */
static double memory_allowed(gc_device device) {
    size_t limit = gc_memory_get_stats(device).limit_bytes, free_bytes, total;
    if (limit) return (double)limit;
    gc_memory_device_info(device, &free_bytes, &total);
    return (double)total;
}

/* The bytes of one row of t (dim 0 indexes the rows). */
static double row_bytes(const gc_tensor *t) {
    double bytes = (double)gc_dtype_size(t->dtype);
    for (int d = 1; d < t->ndim; d++) bytes *= (double)t->shape[d];
    return bytes;
}

/* GC_GLOBAL_LOSS_AUTO: the ring when the gathered representations and their gradients would
 * take more than the share of the smallest rank's allowance (every rank decides alike from
 * the same numbers). */
static bool ring_wanted(const gc_cache_config *config, gc_tensor *const *leaves, const rank_rows *all, int world) {
    double smallest = all[0].limit, gathered = 0;
    for (int r = 1; r < world; r++) smallest = all[r].limit < smallest ? all[r].limit : smallest;
    for (int m = 0; m < config->n_models; m++)
        for (int r = 0; r < world; r++) gathered += 2 * (double)all[r].rows[m] * row_bytes(leaves[m]);
    double share = config->ring_share > 0 ? config->ring_share : GC_CACHE_RING_SHARE;
    return gathered > share * smallest;
}

/* The global tensor of model m (uninitialised, [every rank's rows, D...]) that its leaves of
 * every rank are gathered into; counts[world] are each rank's rows. */
static gc_tensor *global_of(const gc_tensor *leaf, const int64_t *counts, int world) {
    int64_t shape[GC_MAX_DIMS], total = 0;
    for (int r = 0; r < world; r++) total += counts[r];
    memcpy(shape, leaf->shape, sizeof shape);
    shape[0] = total;
    return gc_empty(leaf->ndim, shape, leaf->dtype, leaf->device);
}

/* The ranks' rows are their word: checked before they size a buffer or a collective (the
 * loss indexes the global batch in i32, so no rank has more rows than that). */
static gc_status check_rows(const rank_rows *all, int world, int n_models) {
    for (int r = 0; r < world; r++)
        for (int m = 0; m < n_models; m++)
            if (all[r].rows[m] < 0 || all[r].rows[m] > INT32_MAX) {
                gc_set_error(GC_ERR_FORMAT, "cache: rank %d says it has %lld rows of model %d (0 to %d)", r,
                             (long long)all[r].rows[m], m, INT32_MAX);
                return GC_ERR_FORMAT;
            }
    return GC_OK;
}

gc_status gc_cache_global_batch(const gc_cache *cache, gc_tensor *const *leaves, gc_tensor **global,
                                gc_cache_exchange *exchange) {
    const gc_cache_config *config = &cache->config;
    gc_process_group *group = config->group;
    int n = config->n_models;
    *exchange = (gc_cache_exchange){.ring = group && config->global_loss == GC_GLOBAL_LOSS_RING};
    if (!group || exchange->ring) {
        for (int m = 0; m < n; m++) global[m] = gc_tensor_retain(leaves[m]);
        return GC_OK;
    }
    for (int m = 0; m < n; m++) global[m] = NULL;
    int world = gc_dist_world_size(group), rank = gc_dist_rank(group);
    bool choosing = config->global_loss == GC_GLOBAL_LOSS_AUTO && config->loss.group_value_and_grad;
    rank_rows mine = {.limit = choosing ? memory_allowed(leaves[0]->device) : 0};
    rank_rows *all = malloc((size_t)world * sizeof *all);
    int64_t *counts = malloc((size_t)world * sizeof *counts);
    if (!all || !counts) gc_fatal("cache: out of host memory for %d ranks", world);
    for (int m = 0; m < n; m++) mine.rows[m] = leaves[m]->shape[0];
    gc_status status = gc_dist_all_gather_host(group, &mine, sizeof mine, all);
    if (status == GC_OK) status = check_rows(all, world, n);
    if (status == GC_OK && choosing) exchange->ring = ring_wanted(config, leaves, all, world);
    bool exchanged = status == GC_OK; /* alike on every rank: the same rows were checked */
    for (int m = 0; m < n && status == GC_OK; m++) {
        if (exchange->ring) {
            global[m] = gc_tensor_retain(leaves[m]);
            continue;
        }
        for (int r = 0; r < world; r++) counts[r] = all[r].rows[m];
        global[m] = global_of(leaves[m], counts, world);
        if (!global[m]) status = gc_last_status();
    }
    /* every buffer made before any gather: a rank the memory limit refuses one tells the others,
     * rather than leave them in a gather it skips (with automatic chunk sizing: gc_cache_agree) */
    if (exchanged && !exchange->ring) status = gc_cache_agree(cache, status);
    for (int m = 0; m < n && status == GC_OK && !exchange->ring; m++) {
        for (int r = 0; r < world; r++) counts[r] = all[r].rows[m];
        for (int r = 0; r < rank; r++) exchange->own_start[m] += counts[r];
        status = gc_dist_work_wait(gc_dist_all_gather_start(group, leaves[m], global[m], counts));
        gc_set_requires_grad(global[m], true);
    }
    free(all);
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

/* Each model's rounds: with every backward reduced, the most chunks any rank has of it (one
 * all-reduce of the counts), so that every rank launches the same reductions in the same order. */
static gc_status agree_rounds(const gc_cache *cache, gc_cache_sync *sync) {
    int n = cache->config.n_models;
    double most[GC_CACHE_MAX_MODELS];
    for (int m = 0; m < n; m++) most[m] = (double)sync->rounds[m];
    gc_tensor *counts = gc_from_host(most, GC_SHAPE(n), GC_F64, gc_cpu());
    gc_status status = counts ? gc_dist_all_reduce(cache->config.group, counts, GC_DIST_MAX) : gc_last_status();
    for (int m = 0; m < n && status == GC_OK; m++) {
        double most_chunks = ((const double *)gc_data(counts))[m]; /* a peer's word: no more chunks than rows */
        if (!(most_chunks >= 0 && most_chunks <= INT32_MAX)) {
            gc_set_error(GC_ERR_FORMAT, "cache: a rank says it has %g chunks of model %d", most_chunks, m);
            status = GC_ERR_FORMAT;
        }
        sync->rounds[m] = status == GC_OK ? (int64_t)most_chunks : 0;
    }
    gc_tensor_release(counts);
    return status;
}

gc_status gc_cache_sync_begin(const gc_cache *cache, const int64_t *chunks, gc_cache_sync *sync) {
    gc_ddp *ddp = cache->config.ddp;
    int n = cache->config.n_models;
    /* ZeRO-2b reduces every chunk's backward into the shards, so that no bucket outlives it */
    *sync = (gc_cache_sync){.ddp = ddp, .outer = ddp ? gc_ddp_require_sync(ddp) : false,
                            .every = cache->config.sync_every_backward || (ddp && gc_ddp_reduces_every_backward(ddp))};
    memcpy(sync->rounds, chunks, (size_t)n * sizeof *chunks);
    gc_status status = sync->ddp && sync->every && sync->outer ? agree_rounds(cache, sync) : GC_OK;
    for (int m = 0; m < n; m++)
        if (sync->rounds[m] > 0) sync->last_model = m;
    return status;
}

static bool is_last(const gc_cache_sync *sync, int m, int64_t c) {
    return m == sync->last_model && c == sync->rounds[m] - 1;
}

bool gc_cache_sync_before(const gc_cache_sync *sync, int m, int64_t c, const gc_param_list *reached) {
    if (!sync->ddp) return false;
    /* the caller's setting decides whether this step syncs at all (an outer accumulation) */
    bool synced = sync->outer && (is_last(sync, m, c) || sync->every);
    gc_ddp_set_require_sync(sync->ddp, synced);
    /* reducing every backward, each reduces only its own model's gradients: the other models'
     * buckets neither hold its buckets up nor get reduced as zeros */
    if (synced && sync->every && reached) gc_ddp_expect_params(sync->ddp, reached);
    return synced;
}

gc_status gc_cache_sync_after(const gc_cache_sync *sync, bool synced, int m, int64_t c, gc_status status) {
    if (!synced) return status;
    /* the step's last reduction checks that every parameter got its gradient; one after a
     * local failure is completed all the same, so that the ranks' collectives stay matched */
    gc_status reduced = status == GC_OK && is_last(sync, m, c) ? gc_ddp_wait(sync->ddp) : gc_ddp_wait_partial(sync->ddp);
    return status == GC_OK ? reduced : status;
}

gc_status gc_cache_sync_pad(const gc_cache_sync *sync, int m, int64_t chunks, const gc_param_list *reached) {
    gc_status status = GC_OK;
    for (int64_t c = chunks; c < sync->rounds[m] && sync->every; c++) {
        /* no backward: waiting marks every gradient ready, as it is (none: zeros) */
        bool synced = gc_cache_sync_before(sync, m, c, reached);
        status = gc_cache_sync_after(sync, synced, m, c, status);
    }
    return status;
}

void gc_cache_sync_end(const gc_cache_sync *sync) {
    if (sync->ddp) gc_ddp_set_require_sync(sync->ddp, sync->outer);
}
