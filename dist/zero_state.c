/* ZeRO's optimizer state in checkpoints (include/gradcache/zero.h): gathered from every rank's
 * shards into whole tensors under gc_adamw_state's names when saving, re-partitioned into this
 * rank's shards when loading, so that one checkpoint serves every world size. */
#include <stdlib.h>
#include <string.h>

#include "ddp_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "zero_internal.h"

/* Which state kind each of the bucketer's parameters has on any rank: has[param * KINDS + k]
 * (one MAX all-reduce; a rank holds pieces of some parameters only). */
static gc_status agree_on_kinds(gc_zero_adamw *opt, int32_t *has) {
    const gc_adamw *adamw = &opt->adamw;
    gc_tensor **states[GC_ADAMW_STATE_KINDS] = {adamw->exp_avg, adamw->exp_avg_sq, adamw->master};
    int n = opt->ddp->params.count, piece = 0;
    for (int b = 0, param = 0; b < gc_ddp_bucket_count(opt->ddp); b++)
        for (int i = 0; i < gc_ddp_get_bucket(opt->ddp, b).n_params; i++, param++) {
            int64_t offset, from, end;
            gc_zero_part(opt->ddp, b, i, &offset, &from, &end);
            for (int k = 0; k < GC_ADAMW_STATE_KINDS; k++)
                has[param * GC_ADAMW_STATE_KINDS + k] = from < end && states[k][piece] != NULL;
            piece += from < end;
        }
    gc_tensor *flags = gc_from_host(has, GC_SHAPE((int64_t)n * GC_ADAMW_STATE_KINDS + 1), GC_I32, gc_cpu());
    gc_status status = flags ? gc_dist_all_reduce(opt->group, flags, GC_DIST_MAX) : gc_last_status();
    if (status == GC_OK) memcpy(has, gc_data(flags), (size_t)n * GC_ADAMW_STATE_KINDS * sizeof *has);
    gc_tensor_release(flags);
    return status;
}

/* State kind k of bucket b, whole: this rank's pieces' state (zeros where a piece has none)
 * in a [numel] f32 buffer's own shard, all-gathered in place. `piece`: the index of the
 * bucket's first piece. */
static gc_tensor *gather_kind(gc_zero_adamw *opt, int b, int k, int piece, int64_t *counts, gc_status *status) {
    gc_ddp_bucket_info info = gc_ddp_get_bucket(opt->ddp, b);
    gc_tensor **states[GC_ADAMW_STATE_KINDS] = {opt->adamw.exp_avg, opt->adamw.exp_avg_sq, opt->adamw.master};
    int world = gc_dist_world_size(opt->group);
    for (int r = 0; r < world; r++) counts[r] = info.numel / world + (r < info.numel % world);
    gc_tensor *whole = gc_zeros(GC_SHAPE(info.numel), GC_F32, info.shard_grad->device);
    if (!whole) {
        *status = gc_last_status();
        return NULL;
    }
    for (int i = 0; i < info.n_params; i++) {
        int64_t offset, from, end;
        gc_zero_part(opt->ddp, b, i, &offset, &from, &end);
        if (from >= end) continue;
        gc_tensor *state = states[k][piece++], *place = gc_slice0(whole, from, end);
        if (state && *status == GC_OK) *status = gc_copy_(place, state);
        gc_tensor_release(place);
    }
    gc_tensor *mine = gc_slice0(whole, info.shard_offset, info.shard_offset + info.shard_count);
    gc_status gathered = gc_dist_work_wait(gc_dist_all_gather_start(opt->group, mine, whole, counts));
    if (*status == GC_OK) *status = gathered;
    gc_tensor_release(mine);
    return whole;
}

gc_status gc_zero_adamw_state(gc_zero_adamw *opt, const char *prefix, int root, gc_param_list *list) {
    int world = gc_dist_world_size(opt->group), n = opt->ddp->params.count;
    if (root < -1 || root >= world) gc_fatal("zero_adamw_state: root %d in a world of %d", root, world);
    bool appends = root == -1 || root == gc_dist_rank(opt->group);
    int32_t *has = calloc((size_t)n * GC_ADAMW_STATE_KINDS + 1, sizeof *has);
    int64_t *counts = malloc((size_t)world * sizeof *counts);
    if (!has || !counts) gc_fatal("zero_adamw_state: out of host memory");
    gc_param_list gathered = {0}; /* appended to `list` once everything is in */
    gc_status status = agree_on_kinds(opt, has);
    char names[GC_ADAMW_STATE_KINDS][GC_PARAM_NAME_MAX];
    for (int k = 0; k < GC_ADAMW_STATE_KINDS && status == GC_OK; k++)
        for (int b = 0, first = 0, piece = 0; b < gc_ddp_bucket_count(opt->ddp); b++) {
            int count = gc_ddp_get_bucket(opt->ddp, b).n_params, pieces = 0;
            bool any = false;
            for (int i = 0; i < count; i++) {
                int64_t offset, from, end;
                gc_zero_part(opt->ddp, b, i, &offset, &from, &end);
                pieces += from < end;
                any |= has[(first + i) * GC_ADAMW_STATE_KINDS + k] != 0;
            }
            /* every rank reaches the same verdict, so the same all-gathers are run everywhere */
            gc_tensor *whole = any && status == GC_OK ? gather_kind(opt, b, k, piece, counts, &status) : NULL;
            for (int i = 0; whole && appends && i < count; i++) {
                if (!has[(first + i) * GC_ADAMW_STATE_KINDS + k]) continue;
                int64_t offset;
                const gc_param *param = gc_ddp_bucket_param(opt->ddp, b, i, &offset);
                gc_tensor *flat = gc_slice0(whole, offset, offset + gc_numel(param->tensor));
                gc_tensor *shaped = gc_reshape(flat, param->tensor->ndim, param->tensor->shape);
                gc_adamw_state_names(prefix, param->name, names);
                gc_param_list_add(&gathered, "", names[k], shaped, false);
                gc_tensor_release(flat);
                gc_tensor_release(shaped);
            }
            gc_tensor_release(whole);
            first += count;
            piece += pieces;
        }
    for (int i = 0; i < gathered.count && status == GC_OK; i++)
        gc_param_list_add(list, "", gathered.items[i].name, gathered.items[i].tensor, false);
    gc_param_list_free(&gathered);
    free(has);
    free(counts);
    return status;
}

gc_status gc_zero_adamw_load_state(gc_zero_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step) {
    gc_param_list parts = {0}; /* this rank's part of each saved entry, under the entry's name */
    char names[GC_ADAMW_STATE_KINDS][GC_PARAM_NAME_MAX], text[128], want[64];
    gc_status status = GC_OK;
    for (int b = 0; b < gc_ddp_bucket_count(opt->ddp) && status == GC_OK; b++)
        for (int i = 0; i < gc_ddp_get_bucket(opt->ddp, b).n_params && status == GC_OK; i++) {
            int64_t offset, from, end;
            const gc_param *param = gc_zero_part(opt->ddp, b, i, &offset, &from, &end);
            if (from >= end) continue;
            const gc_tensor *p = param->tensor;
            gc_adamw_state_names(prefix, param->name, names); /* a piece is named after its parameter */
            for (int k = 0; k < GC_ADAMW_STATE_KINDS && status == GC_OK; k++) {
                gc_tensor *saved = gc_param_list_find(list, names[k]);
                if (!saved) continue;
                if (!gc_same_shape(saved, p) || saved->dtype != GC_F32) {
                    gc_set_error(GC_ERR_FORMAT, "zero_adamw_load_state: '%s' is %s, want %s f32", names[k],
                                 gc_tensor_str(saved, text, sizeof text), gc_shape_str(p->ndim, p->shape, want, sizeof want));
                    status = GC_ERR_FORMAT;
                    continue;
                }
                gc_tensor *part = gc_zero_flat_range(saved, from - offset, end - from);
                gc_param_list_add(&parts, "", names[k], part, false);
                gc_tensor_release(part);
            }
        }
    /* the pairing of moments, the masters and the step count: gc_adamw's own checks */
    if (status == GC_OK) status = gc_adamw_load_state(&opt->adamw, prefix, &parts, step);
    gc_param_list_free(&parts);
    return status;
}
