/* Evaluation during a run (--eval-every, gradcache/train.h): when it is due, the best so far
 * and the folder OUT/best/ that holds it, early stopping, and what the checkpoint keeps of it.
 *
 * The checkpoint of a run that evaluates holds, beside its "flag.eval-*" settings:
 *   "eval.best_step"    the step of the best evaluation so far (0: none yet);
 *   "eval.best_value"   its figure of the deciding measure (exact; 0 while none);
 *   "eval.since_best"   evaluations since then without improvement (what --early-stop counts);
 *   "eval.stopped_step" the step --early-stop stopped the run at (0: it did not).
 * A resumed run continues from these: it keeps its best (a worse evaluation never replaces
 * OUT/best/), counts on towards --early-stop, and one that had stopped does not train on. */
#ifndef GC_TRAIN_TRAINER_EVAL_H
#define GC_TRAIN_TRAINER_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/checkpoint.h"
#include "gradcache/train.h"
#include "metadata.h"

typedef struct gc_train_eval_progress {
    bool on;              /* the run evaluates: the checkpoint holds the entries above */
    int64_t best_step;    /* 0: no evaluation yet */
    double best_value;
    int64_t since_best;
    int64_t stopped_step; /* 0: running */
} gc_train_eval_progress;

/* The "flag.eval-*" settings of `config` into `settings` (none when it does not evaluate). */
void gc_train_eval_settings(const gc_trainer_config *config, gc_metadata *settings);
/* The "eval.*" entries of `progress` into a checkpoint's metadata. */
void gc_train_eval_describe(const gc_train_eval_progress *progress, gc_metadata *metadata);
/* Reads them back from a checkpoint of `step` steps, each in range (best_step and stopped_step
 * at most `step`, a run stops at the step it saves); GC_ERR_FORMAT naming `path` and the entry. */
gc_status gc_train_eval_read(const gc_safetensors *file, const char *path, int64_t step,
                             gc_train_eval_progress *progress);

#endif
