/* Evaluation during a run (see trainer_eval.h).
 *
 * Every process evaluates the whole set: their parameters are the same bits, so are their
 * figures, and they take the same decisions (the stop is agreed over the group all the same,
 * one flag, so that no process can train on into a collective the others have left). One
 * process evaluating while the others wait would hold them in a collective for as long as the
 * evaluation takes, past its deadline on a large set. Process 0 alone writes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/clock.h"
#include "gradcache/files.h"
#include "base/json.h"
#include "numbers.h"
#include "trainer_internal.h"
#include "base/write_together.h"

void gc_train_eval_settings(const gc_trainer_config *c, gc_metadata *s) {
    if (!c->eval_every) return;
    /* they decide which model OUT/best/ holds and where --early-stop ends the run */
    gc_metadata_set(s, "flag.eval-every", "%lld", (long long)c->eval_every);
    gc_metadata_set(s, "flag.eval-data", "%s", c->eval_data);
    gc_metadata_set(s, "flag.eval-metric", "%s", c->eval_metric ? c->eval_metric : "default");
    gc_metadata_set(s, "flag.eval-limit", "%lld", (long long)c->eval_limit);
    gc_metadata_set(s, "flag.early-stop", "%lld", (long long)c->early_stop);
}

void gc_train_eval_describe(const gc_train_eval_progress *p, gc_metadata *m) {
    char value[32];
    gc_metadata_set(m, "eval.best_step", "%lld", (long long)p->best_step);
    gc_metadata_set(m, "eval.best_value", "%s", gc_format_exact(p->best_step ? p->best_value : 0, value, sizeof value));
    gc_metadata_set(m, "eval.since_best", "%lld", (long long)p->since_best);
    gc_metadata_set(m, "eval.stopped_step", "%lld", (long long)p->stopped_step);
}

gc_status gc_train_eval_read(const gc_safetensors *file, const char *path, int64_t step, gc_train_eval_progress *p) {
    gc_status status = gc_metadata_read_int(file, path, "eval.best_step", 0, step, &p->best_step);
    if (status == GC_OK) status = gc_metadata_read_double(file, path, "eval.best_value", &p->best_value);
    if (status == GC_OK) status = gc_metadata_read_int(file, path, "eval.since_best", 0, step, &p->since_best);
    if (status == GC_OK) status = gc_metadata_read_int(file, path, "eval.stopped_step", 0, step, &p->stopped_step);
    if (status == GC_OK && p->stopped_step && p->stopped_step != step) {
        gc_set_error(GC_ERR_FORMAT, "%s: eval.stopped_step %lld is not train.step %lld (a run saves where it stops)",
                     path, (long long)p->stopped_step, (long long)step);
        return GC_ERR_FORMAT;
    }
    return status;
}

/* OUT/best.old: the previous best while the new one is moved into place. */
static char *previous_best_path(const gc_trainer *t) { return gc_path_join(t->out, "best.old"); }

static bool exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}

gc_status gc_trainer_eval_begin(gc_trainer *t, bool resume) {
    gc_status status = gc_eval_set_open(&t->eval, &t->config);
    if (status != GC_OK || gc_train_dist_rank(&t->dist) != 0) return status;
    /* what a run killed while replacing its best left: the new folder half-built (a stale
     * temporary), or the old one moved aside before the new one took its place */
    t->best_path = gc_path_join(t->out, "best");
    char *previous = previous_best_path(t);
    status = gc_remove_stale_temporaries(t->best_path, NULL);
    if (status == GC_OK && exists(previous))
        status = exists(t->best_path) ? gc_folder_remove(previous) : gc_folder_commit(previous, t->best_path);
    /* a fresh run starts its log and its checkpoint anew: an earlier run's best is not its own */
    if (status == GC_OK && !resume) status = gc_folder_remove(t->best_path);
    free(previous);
    return status;
}

/* OUT/best/best.json: which evaluation the folder's model had, every measure exactly. */
static gc_status write_summary(const char *folder, const gc_eval_record *r, const char *data) {
    gc_json_text json = {0};
    char text[96], number[32];
    snprintf(text, sizeof text, "{\"step\":%lld,\"metric\":", (long long)r->step);
    gc_json_append(&json, text, strlen(text));
    gc_json_append_string(&json, r->names[r->metric]);
    for (int i = 0; i < r->count; i++) {
        snprintf(text, sizeof text, ",\"%s\":%s", r->names[i], gc_format_exact(r->values[i], number, sizeof number));
        gc_json_append(&json, text, strlen(text));
    }
    snprintf(text, sizeof text, ",\"queries\":%lld,\"eval_data\":", (long long)r->queries);
    gc_json_append(&json, text, strlen(text));
    gc_json_append_string(&json, data);
    gc_json_append(&json, "}\n", 2);
    if (json.failed) gc_fatal("train: out of host memory for best.json");
    char *path = gc_path_join(folder, "best.json");
    const char *texts[] = {json.bytes};
    size_t sizes[] = {json.length};
    gc_status status = gc_write_together(1, &path, texts, sizes);
    free(path);
    gc_json_text_free(&json);
    return status;
}

/* The model and best.json built in a temporary folder, then put in place of OUT/best/: the
 * old folder moved aside to OUT/best.old first (a rename cannot replace a folder that holds
 * files), then removed. A run killed between the renames finds best.old and moves it back
 * (gc_trainer_eval_begin): OUT/best/ is always one whole model. */
static gc_status save_best(gc_trainer *t, const gc_eval_record *r) {
    char *temporary = NULL, *previous = previous_best_path(t);
    gc_status status = gc_folder_begin(t->best_path, &temporary);
    if (status == GC_OK) status = gc_trainer_save_model(t, temporary);
    if (status == GC_OK) status = write_summary(temporary, r, t->config.eval_data);
    bool replacing = status == GC_OK && exists(t->best_path);
    if (replacing && rename(t->best_path, previous) != 0) {
        gc_set_error(GC_ERR_IO, "cannot move %s to %s: %s", t->best_path, previous, strerror(errno));
        status = GC_ERR_IO;
    }
    if (status == GC_OK) status = gc_folder_commit(temporary, t->best_path);
    if (status == GC_OK && replacing) status = gc_folder_remove(previous);
    if (status != GC_OK && temporary) gc_folder_remove(temporary);
    free(temporary);
    free(previous);
    return status;
}

/* Whether step `step` is evaluated: every eval_every steps, and the run's last. */
static bool due(const gc_trainer *t, int64_t step) {
    int64_t every = t->config.eval_every;
    return every && (step % every == 0 || step == t->plan.total_steps);
}

gc_status gc_trainer_eval_after(gc_trainer *t, int64_t step) {
    if (!due(t, step)) return GC_OK;
    gc_train_eval_progress *p = &t->progress.eval;
    gc_eval_record r = {.step = step};
    double start = gc_seconds();
    /* the passages' chunk: a step's rows, which inference holds far less of than training */
    gc_status status = gc_eval_set_measure(&t->eval, &t->model, t->progress.chunk_sizes[1], &r);
    if (status != GC_OK) return status;
    r.seconds = gc_seconds() - start;
    double value = r.values[r.metric];
    r.best = !p->best_step || value > p->best_value; /* a tie is no improvement */
    if (r.best) {
        p->best_step = step;
        p->best_value = value;
        p->since_best = 0;
    } else {
        p->since_best++;
    }
    r.stopped = t->config.early_stop && p->since_best >= t->config.early_stop;
    if (t->dist.group && (status = gc_dist_any(t->dist.group, &r.stopped)) != GC_OK) return status;
    if (r.stopped) {
        p->stopped_step = step;
        t->stop_step = step;
    }
    r.best_step = p->best_step;
    r.best_value = p->best_value;
    r.since_best = p->since_best;
    if (gc_train_dist_rank(&t->dist) == 0) {
        if (r.best && (status = save_best(t, &r)) != GC_OK) return status;
        if ((status = gc_run_log_append_eval(&t->log, &r)) != GC_OK) return status;
    }
    if (t->config.on_eval) t->config.on_eval(t->config.user, &r);
    return GC_OK;
}
