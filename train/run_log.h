/* The training log: DIR/log.jsonl of a run folder, one JSON object per step (a
 * gc_step_record), e.g.
 *   {"step":1,"epoch":0,"loss":2.77,"lr":1e-05,"grad_norm":0.94,"examples_per_second":410.2,
 *    "peak_bytes":3514368,"packed_bytes":98304,"chunk_sizes":[8,8],"loss_scale":65536,"skipped":false,
 *    "seconds":0.039}
 * step counts from 1; epoch from 0; lr is the rate the step used; grad_norm the gradients'
 * total 2-norm before clipping; peak_bytes the step's peak of live bytes on the device;
 * packed_bytes the weights' packed GEMM panels at their highest in the step (outside
 * peak_bytes; 0 with --weight-packing off);
 * chunk_sizes the rows per chunk of the query and passage sides (the batch for a plain step);
 * loss_scale the scale the gradients carried (--precision f16; 1 otherwise) and skipped
 * whether the step found an inf or nan gradient and left the parameters as they were.
 * With several datasets (--data a,b), before "seconds": "dataset" (its index in the list),
 * "dataset_name" (the list's element) and, at a logging point (every log_every steps and the
 * last), "dataset_losses": each dataset's mean loss over its steps since the previous one, in
 * the list's order (null for one that had none).
 * Evaluations have lines of their own (gc_run_log_append_eval).
 * Every line is flushed when written, so the log of a killed run ends at its last step. */
#ifndef GC_TRAIN_RUN_LOG_H
#define GC_TRAIN_RUN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/train.h"

typedef struct gc_run_log {
    FILE *file;
    char *path;
} gc_run_log;

/* Opens the log at `path` to append steps after `kept_steps`: the complete lines of steps
 * 1 .. kept_steps of an existing log are kept (a resumed run continues its log), every other
 * line goes (those a run wrote after its last checkpoint, or a whole old log when kept_steps
 * is 0). The trimmed log replaces the old one atomically. GC_ERR_IO naming the file on
 * failure. */
gc_status gc_run_log_open(gc_run_log *log, const char *path, int64_t kept_steps);
gc_status gc_run_log_append(gc_run_log *log, const gc_step_record *record);
/* An evaluation (--eval-every) after its step's line, e.g.
 *   {"eval":{"step":200,"ndcg@10":0.41,...,"queries":500,"metric":"ndcg@10","best":true,
 *    "best_step":200,"best_value":0.41,"since_best":0,"early_stop":false,"seconds":3.2}}
 * every measure of the set (gc_eval_record), whether it is the best so far (then in OUT/best/),
 * the evaluations since the best without improvement, and whether --early-stop ends the run
 * here. A resumed run keeps the evaluations of the steps it keeps. */
gc_status gc_run_log_append_eval(gc_run_log *log, const gc_eval_record *record);
void gc_run_log_close(gc_run_log *log);

#endif
