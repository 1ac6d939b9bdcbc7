/* A run's loop (gc_trainer_step, gc_trainer_run, gc_trainer_save of gradcache/train.h): each
 * step one update (trainer_step.c), then its log line, the program's callback, evaluation and
 * the checkpoints due. */
#include <stdio.h>
#include <stdlib.h>

#include "trainer_internal.h"

gc_status gc_trainer_failed(const gc_trainer *t, const char *what) {
    gc_status status = gc_last_status();
    char hint[sizeof t->limit.source + 16];
    gc_set_error(status, "%s: %s%s", what, gc_last_error(), gc_mem_limit_hint(&t->limit, status, hint, sizeof hint));
    return status;
}

/* The checkpoint and the model file, both written atomically by rank 0, with every rank's
 * random-number state and AdamW's whole state (every rank takes part). */
gc_status gc_trainer_save(gc_trainer *t) {
    gc_multi_sampler_locate(&t->batches, t->progress.step, &t->progress.epoch, &t->progress.position);
    t->progress.rng = gc_rng_capture();
    int world = t->plan.world;
    gc_rng_context *every_rank = malloc((size_t)world * sizeof *every_rank);
    if (!every_rank) gc_fatal("train: out of host memory for %d random-number states", world);
    gc_param_list state = {0}; /* rank 0's */
    gc_status status = gc_train_dist_gather_rng(&t->dist, &t->progress.rng, every_rank);
    if (status == GC_OK) status = gc_train_optim_state(&t->optimizer, GC_TRAIN_OPTIMIZER_PREFIX, &state);
    if (status == GC_OK && gc_train_dist_rank(&t->dist) == 0)
        status = gc_train_state_save(t->checkpoint_path, &t->model, &state, gc_train_optim_adamw(&t->optimizer)->step,
                                     &t->progress, &t->settings, &t->plan, every_rank);
    gc_param_list_free(&state);
    if (status == GC_OK && gc_train_dist_rank(&t->dist) == 0) status = gc_trainer_save_model(t, t->out);
    if (status == GC_OK) gc_save_timer_restart(&t->save_timer);
    free(every_rank);
    return status;
}

/* The failure of step `step` while `doing` ("training", "logging", "saving"). */
static gc_status step_failed(const gc_trainer *t, int64_t step, const char *doing) {
    char what[64];
    snprintf(what, sizeof what, "step %lld: %s", (long long)step, doing);
    return gc_trainer_failed(t, what);
}

gc_status gc_trainer_step(gc_trainer *t, gc_step_record *record) {
    if (t->progress.step >= t->plan.total_steps) {
        gc_set_error(GC_ERR_CONFIG, "step %lld: past the run's %lld steps", (long long)t->progress.step + 1,
                     (long long)t->plan.total_steps);
        return GC_ERR_CONFIG;
    }
    if (t->progress.eval.stopped_step) {
        gc_set_error(GC_ERR_CONFIG, "step %lld: the run stopped early at step %lld (--early-stop)",
                     (long long)t->progress.step + 1, (long long)t->progress.eval.stopped_step);
        return GC_ERR_CONFIG;
    }
    gc_step_record done;
    if (gc_trainer_update(t, &done) != GC_OK) return step_failed(t, t->progress.step + 1, "training");
    if (gc_train_dist_rank(&t->dist) == 0 && gc_run_log_append(&t->log, &done) != GC_OK)
        return step_failed(t, done.step, "logging");
    if (t->config.on_step) t->config.on_step(t->config.user, &done);
    if (gc_trainer_eval_after(t, done.step) != GC_OK) return step_failed(t, done.step, "evaluating");
    bool checkpoint = t->config.save_every && done.step % t->config.save_every == 0, time_up;
    if (gc_save_timer_due(&t->save_timer, &t->dist, &time_up) != GC_OK)
        return step_failed(t, done.step, "agreeing on a checkpoint");
    if ((checkpoint || time_up || done.step == t->stop_step) && gc_trainer_save(t) != GC_OK)
        return step_failed(t, done.step, "saving");
    if (record) *record = done;
    return GC_OK;
}

gc_status gc_trainer_run(gc_trainer *t) {
    gc_status status = GC_OK;
    while (status == GC_OK && t->progress.step < t->stop_step) status = gc_trainer_step(t, NULL);
    return status;
}
