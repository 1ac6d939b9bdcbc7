/* The training checkpoint: everything a run needs to continue bitwise where it stopped.
 *
 * A safetensors file holding the parameters under their names, AdamW's moments
 * ("optimizer.exp_avg.<param>", "optimizer.exp_avg_sq.<param>"), and metadata:
 *   - the model's description (see model_file.h), so the file also rebuilds the model;
 *   - "train.step" (steps done), "train.epoch" and "train.position" (the epoch of the next
 *     step and how many of its examples earlier steps used), "optimizer.step";
 *   - "train.query_chunk_size" and "train.passage_chunk_size": the GradCache chunk sizes in
 *     effect (automatic sizing may have lowered those the flags asked for);
 *   - "rng.<device>.seed" and "rng.<device>.offset" (decimal) for the default generator of
 *     every device ("cpu", "cuda:0", ...): the dropout masks of the next step; in a
 *     data-parallel run those of rank 0, with "rng.rank<R>.<device>.seed" and ".offset" for
 *     every other rank R, and "dist.world_size" (absent: 1) -- each rank draws its own masks,
 *     so a run resumes only with as many processes as wrote it;
 *   - the run's settings ("flag.<name>": every flag that decides what the run computes). */
#ifndef GC_CLI_TRAIN_STATE_H
#define GC_CLI_TRAIN_STATE_H

#include "metadata.h"
#include "model.h"

typedef struct gc_train_progress {
    int64_t step, epoch, position;
    int64_t chunk_sizes[2]; /* query, passage */
    gc_rng_context rng;
} gc_train_progress;

/* Writes the checkpoint to `path` atomically; ranks[world] are the random-number states of
 * every rank of the run (ranks[0] is progress->rng in a world of one). */
gc_status gc_train_state_save(const char *path, const gc_dual_encoder *model, const gc_adamw *optimizer,
                              const gc_train_progress *progress, const gc_metadata *settings,
                              const gc_rng_context *ranks, int world);
/* Checks that the checkpoint at `path` was written with `settings` and by a run of `world`
 * processes (GC_ERR_FORMAT naming the first that differs, before anything is loaded), then
 * loads the parameters into `model`, the moments and step into `optimizer` and the rest,
 * with the random-number state of `rank`, into *progress. GC_ERR_IO or GC_ERR_FORMAT naming
 * the file when it cannot be read or is not such a checkpoint. */
gc_status gc_train_state_load(const char *path, gc_dual_encoder *model, gc_adamw *optimizer,
                              gc_train_progress *progress, const gc_metadata *settings, int rank, int world);

#endif
