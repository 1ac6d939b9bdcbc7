/* ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
 * Models"; DeepSpeed's stages 1 and 2): AdamW whose state is sharded over the ranks of a
 * data-parallel run.
 *
 * With AdamW and f32 master weights the optimizer holds 12 bytes per parameter (16 bytes of
 * f32 state against 2 of an f16 weight, counting the master), every rank the same. Under a
 * bucketer with gc_ddp_options.zero >= GC_ZERO_1 (gradcache/ddp.h) each rank owns one
 * contiguous shard of every gradient bucket, and this optimizer keeps the moments and masters
 * of its shards only: 12 / world_size bytes per parameter. A step is then
 *   1. the bucketer's reduction, a reduce-scatter per bucket: each rank gets the average of
 *      its own shard (the reduce-scatter half of a ring all-reduce, and on the TCP ring
 *      bitwise the same sums);
 *   2. the AdamW update of the shard, the same fused kernel on flat views of the pieces of
 *      parameters that fall into it (the update of an element depends on that element alone,
 *      so a sharded update is the unsharded one, bit for bit);
 *   3. an all-gather per bucket of the updated parameters, in their own dtype.
 * Sharding changes no number: with one reduction per step, the TCP ring and the same world
 * size, a sharded run is bitwise the unsharded one (clipping aside: the norm adds the shards'
 * sums in another order, see below).
 *
 * The loop, on every rank (the same at every stage, GC_ZERO_0 included, where the step is
 * gc_adamw's on every rank and there is nothing to gather):
 *
 *     gc_ddp *ddp = gc_ddp_new(group, &params, &(gc_ddp_options){.zero = GC_ZERO_1});
 *     gc_zero_adamw *opt = gc_zero_adamw_new(ddp, lr, 0.9, 0.999, 1e-8, 0.01);
 *     for each step:
 *         gc_cache_step(...)  (or forward, backward, gc_ddp_wait): the reduce-scatters
 *         bool found_inf = false;
 *         if (scaler) gc_zero_adamw_check_grads(opt, &found_inf);  // agreed by every rank
 *         if (!found_inf) {
 *             double grad_scale = scaler ? 1 / scaler->scale : 1;
 *             gc_zero_adamw_clip_grad_scale(opt, max_norm, &grad_scale);  // global norm
 *             gc_zero_adamw_step_scaled(opt, grad_scale);  // update + all-gather
 *         }
 *         if (scaler) gc_loss_scaler_update(scaler, found_inf);
 *         gc_ddp_zero_grad(ddp);
 *
 * Collectives per step beyond the bucketer's reduce-scatters: one all-gather per bucket,
 * one all-reduce of one value for check_grads, one for clipping (none at GC_ZERO_0, whose
 * gradients are whole on every rank).
 *
 * After the bucketer's reduction a parameter's own gradient is spent (zero at ZeRO-1, absent
 * at ZeRO-2): the gradient lives in the shards, so clip and check through this optimizer, not
 * through gc_clip_grad_norm or gc_loss_scaler_check_grads on the parameters.
 *
 * Checkpoints: gc_zero_adamw_state gathers the shards into whole tensors named as
 * gc_adamw_state names them, so that a checkpoint written by any world size, sharded or not,
 * loads into any other (gc_zero_adamw_load_state re-partitions; gc_adamw_load_state reads it
 * unsharded). */
#ifndef GRADCACHE_ZERO_H
#define GRADCACHE_ZERO_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/ddp.h"
#include "gradcache/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_zero_adamw gc_zero_adamw;

/* AdamW (gc_adamw_init's hyper-parameters, with f32 masters for f16 and bf16 parameters) over
 * this rank's shards of the bucketer's parameters, no_decay as their list gave it. The
 * bucketer must outlive the optimizer. Allocates nothing until the first step. */
gc_zero_adamw *gc_zero_adamw_new(gc_ddp *ddp, double lr, double beta1, double beta2, double eps, double weight_decay);
void gc_zero_adamw_free(gc_zero_adamw *opt);

/* The AdamW over this rank's shard: its lr (set it between steps, as from gc_lr_at), betas,
 * eps, weight_decay, step count and master_weights (set false before the first step to round
 * every update straight into 16-bit parameters) are gc_adamw's; its parameters are flat views
 * of the pieces of parameters in this rank's shards, named after the parameters (a parameter
 * has at most one piece per rank), and its state is theirs. */
gc_adamw *gc_zero_adamw_adamw(gc_zero_adamw *opt);

/* Whether any rank's shard of the reduced gradient holds an inf or a nan: each rank checks
 * its shards (one fused pass) and the ranks agree (gc_dist_any), so one rank's overflow skips
 * the step on every rank. On an error *found_inf is true. Call it on every rank. */
gc_status gc_zero_adamw_check_grads(gc_zero_adamw *opt, bool *found_inf);

/* gc_clip_grad_scale for sharded gradients: the global norm adds every rank's sum of squares
 * over its shards (one all-reduce of one f64 value; none at GC_ZERO_0) and is the same on every
 * rank; it agrees with gc_clip_grad_norm's over the whole averaged gradient to rounding (each
 * piece's sum is rounded to f32, as each parameter's is there), not bitwise. Returns the total
 * (times *grad_scale); nan on an error (recorded), with *grad_scale unchanged. */
double gc_zero_adamw_clip_grad_scale(gc_zero_adamw *opt, double max_norm, double *grad_scale);

/* The step: AdamW on this rank's shards with every gradient times grad_scale (finite, >= 0;
 * see gc_adamw_step_scaled), then every rank's updated parameters all-gathered into every
 * rank's parameters (in their dtype; through a staging buffer of one bucket at a time). Call
 * it on every rank. GC_ERR_PEER or an allocation error: the parameters may then differ between
 * the ranks (resume from a checkpoint). */
gc_status gc_zero_adamw_step_scaled(gc_zero_adamw *opt, double grad_scale);
gc_status gc_zero_adamw_step(gc_zero_adamw *opt);

/* Appends the whole optimizer state, gathered from every rank's shards, as new f32 tensors of
 * the parameters' shapes named as gc_adamw_state names them ("<prefix>.exp_avg.<param>", ...;
 * a parameter without state has no entries), on rank `root` (on every rank for -1); the other
 * ranks take part and append nothing. A collective: every rank calls it, with the same root.
 * Memory: one bucket's gathered state at a time on the ranks that append nothing, the whole
 * state on those that do. GC_ERR_PEER or an allocation error, with nothing appended. */
gc_status gc_zero_adamw_state(gc_zero_adamw *opt, const char *prefix, int root, gc_param_list *list);
/* Loads the whole state (as gc_zero_adamw_state or gc_adamw_state wrote it, by any world size)
 * from `list`: each rank copies its shards' parts and sets the step count. The checks and the
 * all-or-nothing rule are gc_adamw_load_state's, plus: an entry must be f32 of its parameter's
 * shape (GC_ERR_FORMAT naming it). Not a collective: the parameters are the caller's to load,
 * the same on every rank. */
gc_status gc_zero_adamw_load_state(gc_zero_adamw *opt, const char *prefix, const gc_param_list *list, int64_t step);

/* Bytes of optimizer state this rank holds (moments and masters), and what it has sent. */
typedef struct gc_zero_stats {
    size_t state_bytes;     /* the moments and masters of this rank's shards */
    int64_t all_gathers;    /* parameter all-gathers so far (one per bucket per step) */
    int64_t agreements;     /* small all-reduces so far (check_grads, clipping) */
} gc_zero_stats;
gc_zero_stats gc_zero_adamw_get_stats(const gc_zero_adamw *opt);

#ifdef __cplusplus
}
#endif
#endif
