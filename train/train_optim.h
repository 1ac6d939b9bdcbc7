/* The trainer's AdamW: whole on every process, or, in a data-parallel run with --zero 1 or 2,
 * over this rank's shards of the gradient buckets (gradcache/zero.h). The trainer calls the
 * functions below whichever it is; the checkpoint holds the whole state either way (gathered
 * onto rank 0 when saving, each rank taking its part when loading), so that a run resumes at
 * any stage and any world size. */
#ifndef GC_TRAIN_TRAIN_OPTIM_H
#define GC_TRAIN_TRAIN_OPTIM_H

#include "gradcache/optim.h"
#include "gradcache/zero.h"
#include "train_dist.h"

typedef struct gc_train_optim {
    gc_adamw whole;         /* without sharding */
    bool whole_ready;
    gc_zero_adamw *sharded; /* with: NULL otherwise */
    gc_process_group *group;
} gc_train_optim;

/* AdamW over `params` (lr, betas 0.9 and 0.999, eps 1e-8, weight_decay); sharded when the
 * run's bucketer shards (dist->ddp at GC_ZERO_1 or more). */
gc_status gc_train_optim_init(gc_train_optim *o, const gc_train_dist *dist, const gc_param_list *params, double lr,
                              double weight_decay);
void gc_train_optim_free(gc_train_optim *o);
/* The AdamW that updates (this rank's shards when sharded): its lr and step count. */
gc_adamw *gc_train_optim_adamw(gc_train_optim *o);
/* Whether any rank's gradient holds an inf or a nan (the loss scaler's check, agreed by every
 * rank). */
gc_status gc_train_optim_check_grads(gc_train_optim *o, const gc_param_list *params, bool *found_inf);
/* gc_clip_grad_scale over the whole averaged gradient (the shards' when sharded). */
double gc_train_optim_clip_grad_scale(gc_train_optim *o, const gc_param_list *params, double max_norm,
                                      double *grad_scale);
gc_status gc_train_optim_step_scaled(gc_train_optim *o, double grad_scale);
/* The whole state under gc_adamw_state's names appended to `list` on rank 0 (a collective when
 * sharded: every rank calls it; the others append nothing). */
gc_status gc_train_optim_state(gc_train_optim *o, const char *prefix, gc_param_list *list);
/* The whole state (as gc_train_optim_state wrote it, by any world size) loaded: each rank
 * keeps its shards' part when sharded. gc_adamw_load_state's checks. */
gc_status gc_train_optim_load_state(gc_train_optim *o, const char *prefix, const gc_param_list *list, int64_t step);

#endif
