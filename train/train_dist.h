/* The trainer's data-parallel mode: under a launcher (gradcache launch, torchrun, a cluster's
 * own), each of WORLD_SIZE processes trains on its share of every global batch; the loss
 * sees the whole batch (Gradient Cache's all-gathered representations) and the gradients are
 * averaged by the bucketer, once per step, so that every rank takes the same optimizer step.
 * Rank 0 alone writes the log, the checkpoints and the model. A run that is not launched
 * (no WORLD_SIZE) is a world of one, and every function below is then a no-op. */
#ifndef GC_TRAIN_TRAIN_DIST_H
#define GC_TRAIN_TRAIN_DIST_H

#include <stdbool.h>

#include "gradcache/ddp.h"
#include "gradcache/dist.h"
#include "gradcache/rng.h"

typedef struct gc_train_dist {
    gc_dist_env env;
    gc_process_group *group; /* NULL in a world of one */
    gc_ddp *ddp;             /* NULL until gc_train_dist_attach, and in a world of one */
} gc_train_dist;

/* Reads the launcher's environment and, for two processes or more, forms the process group
 * (TCP for the CPU; NCCL on cuda:LOCAL_RANK, which *device becomes, for CUDA). GC_ERR_CONFIG
 * for a malformed environment or a batch smaller than the processes; else the status of the
 * group's forming. */
gc_status gc_train_dist_begin(gc_train_dist *dist, int64_t batch_size, gc_device *device);
/* The bucketer over the model's parameters (which it broadcasts from rank 0); half
 * gradients reduced in f32 or in their own dtype (gc_ddp_options.reduce_in_f32); sharded
 * from GC_ZERO_1 on (gc_ddp_options.zero). */
gc_status gc_train_dist_attach(gc_train_dist *dist, const gc_param_list *params, bool reduce_in_f32, gc_zero zero);
void gc_train_dist_end(gc_train_dist *dist);

int gc_train_dist_rank(const gc_train_dist *dist);
int gc_train_dist_world(const gc_train_dist *dist);
/* This rank's rows of a global batch of `batch` examples: [*start, *start + *count), the
 * batch split as evenly as possible (the first batch % world ranks get one more). */
void gc_train_dist_share(const gc_train_dist *dist, int64_t batch, int64_t *start, int64_t *count);
/* This rank's dropout stream: the run's own for rank 0 (so a world of one draws what an
 * unlaunched run draws), a different one for every other rank. */
uint64_t gc_train_dist_dropout_seed(const gc_train_dist *dist, uint64_t run_seed);
/* Every rank's random-number state (all[world]), for rank 0's checkpoint. */
gc_status gc_train_dist_gather_rng(gc_train_dist *dist, const gc_rng_context *mine, gc_rng_context *all);
/* Zeroes the gradients (in place, as views of the buckets, when distributed). */
void gc_train_dist_zero_grad(gc_train_dist *dist, const gc_param_list *params);

#endif
