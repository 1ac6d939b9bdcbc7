/* The training checkpoint, DIR/checkpoint.safetensors of a run folder: everything a run needs
 * to continue bitwise where it stopped (gc_trainer_resume).
 *
 * A safetensors file holding the parameters under their names, AdamW's moments
 * ("optimizer.exp_avg.<param>", "optimizer.exp_avg_sq.<param>"), and metadata:
 *   - the model's description (see model_file.h), so the file also rebuilds the model;
 *   - "train.step" (steps done), "train.epoch" and "train.position" (the epoch of the next
 *     step and how many of its examples earlier steps used: the schedule's epoch with several
 *     datasets, gc_multi_sampler_locate), "optimizer.step";
 *   - with several datasets, "train.dataset<D>.loss_sum" (exact) and "train.dataset<D>.loss_steps"
 *     for each dataset D: its losses since the last logging point (dataset_losses.h);
 *   - with --gc only, "train.query_chunk_size" and "train.passage_chunk_size": the GradCache
 *     chunk sizes in effect (automatic sizing may have lowered those the flags asked for);
 *   - "rng.<device>.seed" and "rng.<device>.offset" (decimal) for the default generator of
 *     every device ("cpu", "cuda:0", ...): the dropout masks of the next step; in a
 *     data-parallel run those of rank 0, with "rng.rank<R>.<device>.seed" and ".offset" for
 *     every other rank R, and "dist.world_size" (absent: 1) -- each rank draws its own masks;
 *     a run resumed with another number of processes continues each rank's stream that the
 *     file holds and starts the others' past every offset it holds (the data order is the
 *     same at any world size: the global batch of a step is a function of the step);
 *   - with --precision f16 or bf16, AdamW's f32 master weights ("optimizer.master.<param>";
 *     the parameters hold the masters rounded to 16 bits) and, with f16, the loss scaler's
 *     state: "scaler.scale" (exact), "scaler.growth_tracker", "scaler.skipped_steps";
 *   - with --eval-every, "eval.*": the best evaluation so far and --early-stop's count
 *     (trainer_eval.h);
 *   - the run's settings ("flag.<name>": every flag that decides what the run computes,
 *     --precision among them: a checkpoint of another precision is refused, naming it).
 *
 * A checkpoint is trusted only as far as it is checked: on load, every value must be one the
 * run could have written (see gc_train_state_load), so that a damaged or edited file is
 * refused with one line naming the entry instead of aborting later or continuing to a
 * different model. */
#ifndef GC_TRAIN_TRAIN_STATE_H
#define GC_TRAIN_TRAIN_STATE_H

#include "gradcache/loss_scaler.h"
#include "gradcache/optim.h"
#include "gradcache/rng.h"
#include "dataset_losses.h"
#include "gradcache/train.h"
#include "metadata.h"
#include "train_data.h"
#include "train_optim.h"
#include "trainer_eval.h"

/* AdamW's entries are "<prefix>.exp_avg.<param>", ... (gc_adamw_state_names). */
#define GC_TRAIN_OPTIMIZER_PREFIX "optimizer"

/* The largest generator offset a checkpoint may hold: 2^62 words, leaving as many again
 * for the rest of the run (a step draws one word per dropped element). */
#define GC_TRAIN_MAX_RNG_OFFSET (UINT64_C(1) << 62)

/* The shape of a run, which a checkpoint must fit. */
typedef struct gc_train_plan {
    int64_t total_steps;
    const gc_multi_sampler *batches; /* where a step falls: its epoch and position */
    bool gc;                         /* chunk sizes are stored only for Gradient Cache runs */
    int rank, world;                 /* this process's place in a data-parallel run (0 and 1: none) */
} gc_train_plan;

typedef struct gc_train_progress {
    int64_t step, epoch, position;
    int64_t chunk_sizes[2]; /* query, passage */
    gc_rng_context rng;
    bool scaled;             /* f16: the loss scaler below is part of the state */
    gc_loss_scaler scaler;
    gc_dataset_losses dataset_losses; /* several datasets: part of the state */
    gc_train_eval_progress eval; /* --eval-every: the best so far and --early-stop's count */
} gc_train_progress;

/* The run's settings (the "flag.*" entries above) into `settings`: every setting of `config`
 * that decides what the run computes, with each dataset's size and a hash of its texts as
 * "flag.data" (and with several, "flag.sampling"). Where the run computes (device, memory
 * limit), where it writes, how often it saves and logs are left out: free to change. */
void gc_train_settings(const gc_trainer_config *config, const gc_train_data *data, gc_metadata *settings);

/* Writes the checkpoint to `path` atomically: the model, optimizer_state (AdamW's whole state
 * under GC_TRAIN_OPTIMIZER_PREFIX: gc_train_optim_state) after optimizer_step steps, and the
 * progress; ranks[plan->world] are the random-number states of every rank of the run
 * (ranks[0] is progress->rng in a world of one). */
gc_status gc_train_state_save(const char *path, const gc_dual_encoder *model, const gc_param_list *optimizer_state,
                              int64_t optimizer_step,
                              const gc_train_progress *progress, const gc_metadata *settings,
                              const gc_train_plan *plan, const gc_rng_context *ranks);
/* Loads the checkpoint at `path` into `model`, `optimizer` (moments and step) and *progress
 * (with the random-number state of plan->rank), which holds on entry the state a fresh run
 * starts from. Before anything is loaded, the file must have been written with `settings`,
 * describe `model` (format and model.*, value for value: gc_model_describe) and fit `plan`:
 * dist.world_size any (the generators of that many ranks), train.step at most the run's steps,
 * train.epoch and train.position where that step falls, optimizer.step equal to train.step
 * less the steps the f16 loss scaler skipped (scaler.* in [0, FLT_MAX] and within the run),
 * chunk sizes present with --gc only and no larger than the fresh run's, the generators of
 * every rank of the fresh run's seeds and at most GC_TRAIN_MAX_RNG_OFFSET along, and no
 * metadata key that such a run does not write. Then the parameters must be there with their
 * shapes and dtype, AdamW's two moments of every parameter after step 0 (none at step 0),
 * and no other tensor. GC_ERR_IO or GC_ERR_FORMAT naming the file and the first entry that
 * does not fit. */
gc_status gc_train_state_load(const char *path, gc_dual_encoder *model, gc_train_optim *optimizer,
                              gc_train_progress *progress, const gc_metadata *settings, const gc_train_plan *plan);
/* The same from an opened file (`path` names it in messages); for the fuzzer. */
gc_status gc_train_state_load_from(const gc_safetensors *file, const char *path, gc_dual_encoder *model,
                                   gc_train_optim *optimizer, gc_train_progress *progress, const gc_metadata *settings,
                                   const gc_train_plan *plan);

#endif
