/* ZeRO's AdamW (include/gradcache/zero.h): gc_adamw itself, run over flat views of the pieces
 * of parameters that fall into this rank's shards, whose gradients are views of the
 * bucketer's shard gradients; then the all-gather of the updated parameters. Reusing gc_adamw
 * whole (its state allocated all or nothing at the first step, its masters, its checks) is what
 * makes a sharded update the unsharded one, bit for bit.
 *
 * dist/ already builds on nn's public headers (the bucketer takes a gc_param_list); this file
 * adds gradcache/optim.h to them. nn/ never includes dist/. */
#include <math.h>
#include <stdlib.h>

#include "ddp_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/loss_scaler.h"
#include "gradcache/ops.h"
#include "zero_internal.h"

/* Elements [start, start + count) of t, flattened: a view outside any graph. */
gc_tensor *gc_zero_flat_range(const gc_tensor *t, int64_t start, int64_t count) {
    bool previous = gc_set_grad_enabled(false);
    int64_t n = gc_numel(t);
    gc_tensor *flat = gc_reshape(t, 1, &n), *range = gc_slice0(flat, start, start + count);
    gc_set_grad_enabled(previous);
    gc_tensor_release(flat);
    return range;
}

const gc_param *gc_zero_part(const gc_ddp *ddp, int b, int index, int64_t *offset, int64_t *from, int64_t *end) {
    gc_ddp_bucket_info info = gc_ddp_get_bucket(ddp, b);
    const gc_param *param = gc_ddp_bucket_param(ddp, b, index, offset);
    int64_t lo = info.shard_offset, hi = info.shard_offset + info.shard_count;
    *from = *offset > lo ? *offset : lo;
    *end = *offset + gc_numel(param->tensor) < hi ? *offset + gc_numel(param->tensor) : hi;
    return param;
}

/* The pieces of bucket b's parameters in this rank's shard, appended to `pieces` as leaves
 * whose gradients are the matching views of the shard gradient. */
static void add_pieces(gc_zero_adamw *opt, int b, gc_param_list *pieces) {
    gc_ddp_bucket_info info = gc_ddp_get_bucket(opt->ddp, b);
    for (int i = 0; i < info.n_params; i++) {
        int64_t offset, first, end;
        const gc_param *param = gc_zero_part(opt->ddp, b, i, &offset, &first, &end);
        if (first >= end) continue; /* another rank's */
        gc_tensor *piece = gc_zero_flat_range(param->tensor, first - offset, end - first);
        gc_tensor *grad = gc_slice0(info.shard_grad, first - info.shard_offset, end - info.shard_offset);
        gc_set_requires_grad(piece, true);
        gc_set_grad(piece, grad);
        gc_param_list_add(pieces, "", param->name, piece, param->no_decay);
        gc_tensor_release(piece);
        gc_tensor_release(grad);
    }
}

gc_zero_adamw *gc_zero_adamw_new(gc_ddp *ddp, double lr, double beta1, double beta2, double eps, double weight_decay) {
    gc_zero_adamw *opt = calloc(1, sizeof *opt);
    if (!opt) gc_fatal("zero_adamw: out of host memory");
    opt->ddp = ddp;
    opt->group = gc_ddp_group(ddp);
    gc_param_list pieces = {0};
    for (int b = 0; b < gc_ddp_bucket_count(ddp); b++) add_pieces(opt, b, &pieces);
    gc_adamw_init(&opt->adamw, &pieces, lr, beta1, beta2, eps, weight_decay);
    gc_param_list_free(&pieces);
    return opt;
}

void gc_zero_adamw_free(gc_zero_adamw *opt) {
    if (!opt) return;
    gc_adamw_free(&opt->adamw);
    free(opt);
}

gc_adamw *gc_zero_adamw_adamw(gc_zero_adamw *opt) { return &opt->adamw; }

bool gc_zero_sharded(const gc_zero_adamw *opt) { return gc_ddp_zero(opt->ddp) >= GC_ZERO_1; }

gc_status gc_zero_adamw_check_grads(gc_zero_adamw *opt, bool *found_inf) {
    gc_status checked = gc_loss_scaler_check_grads(&opt->adamw.params, found_inf); /* true on an error */
    gc_status agreed = gc_dist_any(opt->group, found_inf); /* even after an error: every rank takes part */
    opt->stats.agreements++;
    return checked != GC_OK ? checked : agreed;
}

double gc_zero_adamw_clip_grad_scale(gc_zero_adamw *opt, double max_norm, double *grad_scale) {
    double sum = gc_grad_squared_sum(&opt->adamw.params); /* nan after an error: every rank then skips */
    if (gc_zero_sharded(opt)) {
        gc_tensor *total = gc_from_host(&sum, GC_SHAPE(1), GC_F64, gc_cpu());
        gc_status status = total ? gc_dist_all_reduce(opt->group, total, GC_DIST_SUM) : gc_last_status();
        opt->stats.agreements++;
        sum = status == GC_OK ? *(const double *)gc_data(total) : NAN;
        gc_tensor_release(total);
    }
    double norm = sqrt(sum) * *grad_scale;
    gc_clip_scale_for_norm(norm, max_norm, grad_scale);
    return norm;
}

/* Every rank's updated pieces of bucket b into every rank's parameters: this rank's part of
 * the parameters copied into a staging buffer's own shard, all-gathered in place, copied out. */
static gc_status gather_bucket(gc_zero_adamw *opt, int b, int64_t *counts) {
    gc_ddp_bucket_info info = gc_ddp_get_bucket(opt->ddp, b);
    int world = gc_dist_world_size(opt->group);
    for (int r = 0; r < world; r++) counts[r] = info.numel / world + (r < info.numel % world);
    const gc_tensor *first = info.shard_grad; /* of the parameters' dtype and device */
    gc_tensor *staging = gc_empty(GC_SHAPE(info.numel), first->dtype, first->device);
    if (!staging) return gc_last_status();
    gc_status status = GC_OK;
    for (int i = 0; i < info.n_params && status == GC_OK; i++) {
        int64_t offset, from, end;
        const gc_param *param = gc_zero_part(opt->ddp, b, i, &offset, &from, &end);
        if (from >= end) continue;
        gc_tensor *place = gc_slice0(staging, from, end), *piece = gc_zero_flat_range(param->tensor, from - offset, end - from);
        status = gc_copy_(place, piece);
        gc_tensor_release(place);
        gc_tensor_release(piece);
    }
    gc_tensor *mine = gc_slice0(staging, info.shard_offset, info.shard_offset + info.shard_count);
    gc_status gathered = gc_dist_work_wait(gc_dist_all_gather_start(opt->group, mine, staging, counts));
    opt->stats.all_gathers++;
    if (status == GC_OK) status = gathered;
    for (int i = 0; i < info.n_params && status == GC_OK; i++) {
        int64_t offset;
        const gc_param *param = gc_ddp_bucket_param(opt->ddp, b, i, &offset);
        int64_t n = gc_numel(param->tensor);
        gc_tensor *values = gc_slice0(staging, offset, offset + n), *whole = gc_zero_flat_range(param->tensor, 0, n);
        status = gc_copy_(whole, values);
        gc_tensor_release(values);
        gc_tensor_release(whole);
    }
    gc_tensor_release(mine);
    gc_tensor_release(staging);
    return status;
}

gc_status gc_zero_adamw_step_scaled(gc_zero_adamw *opt, double grad_scale) {
    gc_status status = gc_adamw_step_scaled(&opt->adamw, grad_scale);
    if (!gc_zero_sharded(opt)) return status;
    /* a rank whose update failed still takes part, with its old values: the collectives stay
     * matched and the ranks' parameters equal */
    int64_t *counts = malloc((size_t)gc_dist_world_size(opt->group) * sizeof *counts);
    if (!counts) gc_fatal("zero_adamw_step: out of host memory");
    bool previous = gc_set_grad_enabled(false);
    for (int b = 0; b < gc_ddp_bucket_count(opt->ddp); b++) {
        gc_status gathered = gather_bucket(opt, b, counts);
        if (status == GC_OK) status = gathered;
    }
    gc_set_grad_enabled(previous);
    free(counts);
    return status;
}

gc_status gc_zero_adamw_step(gc_zero_adamw *opt) { return gc_zero_adamw_step_scaled(opt, 1); }

gc_zero_stats gc_zero_adamw_get_stats(const gc_zero_adamw *opt) {
    gc_zero_stats stats = opt->stats;
    gc_tensor **states[] = {opt->adamw.exp_avg, opt->adamw.exp_avg_sq, opt->adamw.master};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < opt->adamw.params.count; i++)
            if (states[k][i]) stats.state_bytes += gc_nbytes(states[k][i]);
    return stats;
}
