/* Checkpoints by wall time (gc_trainer_config.checkpoint_minutes): beside --save-every's step
 * count, a checkpoint when M minutes passed since the run started or last saved, so that a
 * killed run loses at most M minutes, whatever a step costs. The ranks of a data-parallel run
 * must save at the same step (saving is collective): each reads its own clock, and one
 * all-reduce of one flag makes the verdict every rank's (any rank's time up saves everywhere). */
#ifndef GC_TRAIN_SAVE_TIMER_H
#define GC_TRAIN_SAVE_TIMER_H

#include <stdbool.h>

#include "train_dist.h"

typedef struct gc_save_timer {
    double minutes; /* 0: none */
    double since;   /* gc_seconds() at the start or the last checkpoint */
} gc_save_timer;

/* Starts the clock (minutes: 0 for none). */
void gc_save_timer_start(gc_save_timer *timer, double minutes);
/* Whether a checkpoint is due, agreed over the ranks (every rank calls it after every step
 * when minutes > 0). GC_OK, or the collective's error (then *due is true). */
gc_status gc_save_timer_due(const gc_save_timer *timer, gc_train_dist *dist, bool *due);
/* A checkpoint was written: the clock starts again. */
void gc_save_timer_restart(gc_save_timer *timer);

#endif
