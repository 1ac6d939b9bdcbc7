/* Automatic chunk sizing across processes (see gc_cache_step): a rank that runs out of memory
 * must not leave the others waiting in a collective it skips, and every rank must retry with
 * the same smaller chunks. So with a process group an attempt stops at three points every rank
 * reaches -- after the graph-less forwards, after the loss, and after the backwards -- and the
 * ranks share how it went there. Inside a phase, a rank that failed still takes part in the
 * collectives the others run: in the backwards, the reductions, with nothing of its own; in the
 * gathered loss, the ranks agree once more after allocating the global batch and before
 * gathering into it (distributed.c); around the ring, the loss agrees after preparing its
 * buffers, and a peer out of memory there is out of memory for every rank
 * (nn/losses/contrastive_ring.c). */
#include <stdlib.h>

#include "cache_internal.h"
#include "gradcache/dist.h"

enum outcome { OUTCOME_OK, OUTCOME_OUT_OF_MEMORY, OUTCOME_FAILED };

static bool out_of_memory(gc_status status) { return status == GC_ERR_OUT_OF_MEMORY || status == GC_ERR_MEM_LIMIT; }

static bool agreeing(const gc_cache *cache) {
    return cache->config.auto_chunk && cache->config.group && gc_dist_world_size(cache->config.group) > 1;
}

gc_status gc_cache_agree(const gc_cache *cache, gc_status status) {
    if (!agreeing(cache)) return status;
    gc_process_group *group = cache->config.group;
    int world = gc_dist_world_size(group);
    /* host memory: a rank at its device's limit can still tell the others */
    int32_t mine = status == GC_OK ? OUTCOME_OK : out_of_memory(status) ? OUTCOME_OUT_OF_MEMORY : OUTCOME_FAILED;
    int32_t *all = malloc((size_t)world * sizeof *all);
    if (!all) gc_fatal("cache: out of host memory for %d ranks", world);
    gc_status shared = gc_dist_all_gather_host(group, &mine, sizeof mine, all);
    int32_t verdict = OUTCOME_OK; /* the worst outcome, first seen on rank `worst` */
    int worst = -1;
    for (int r = 0; r < world && shared == GC_OK; r++) {
        /* a peer's word: anything but the two others is a failure */
        int32_t outcome = all[r] == OUTCOME_OK || all[r] == OUTCOME_OUT_OF_MEMORY ? all[r] : OUTCOME_FAILED;
        if (outcome > verdict) {
            verdict = outcome;
            worst = r;
        }
    }
    free(all);
    /* this rank's own reason, unless it would retry while another rank stops */
    if (status != GC_OK && !(out_of_memory(status) && verdict == OUTCOME_FAILED)) return status;
    if (shared != GC_OK) return shared;
    if (verdict == OUTCOME_OK) return GC_OK;
    /* this rank fits, another does not: out of memory all the same, so that every rank retries */
    gc_status said = verdict == OUTCOME_OUT_OF_MEMORY ? GC_ERR_MEM_LIMIT : GC_ERR_PEER;
    gc_set_error(said, "cache: rank %d %s", worst,
                 verdict == OUTCOME_OUT_OF_MEMORY ? "ran out of memory in this step" : "failed in this step");
    return said;
}

gc_status gc_cache_sync_abandon(const gc_cache *cache, const gc_cache_sync *sync, int m, int64_t next_chunk,
                                gc_status status) {
    if (!agreeing(cache)) return status;
    for (int k = m; k < cache->config.n_models; k++)
        for (int64_t c = k == m ? next_chunk : 0; c < sync->rounds[k]; c++) {
            bool synced = gc_cache_sync_before(sync, k, c, cache->config.models[k].params);
            gc_cache_sync_after(sync, synced, k, c, status); /* completed with empty contributions */
        }
    return status;
}
