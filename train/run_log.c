/* The training log (see run_log.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcache/files.h"
#include "base/json.h"
#include "numbers.h"
#include "run_log.h"

static gc_status io_error(const char *path, const char *doing) {
    gc_set_error(GC_ERR_IO, "%s: cannot %s: %s", path, doing, strerror(errno));
    return GC_ERR_IO;
}

/* The step of a log line: a step's {"step":N,...}, or an evaluation's {"eval":{"step":N,...}};
 * -1 for anything else. */
static long long line_step(const char *line) {
    long long step;
    if (sscanf(line, "{\"step\":%lld", &step) == 1 || sscanf(line, "{\"eval\":{\"step\":%lld", &step) == 1)
        return step;
    return -1;
}

/* Copies the complete lines of `old` whose step is at most kept_steps into `out`. */
static void copy_kept_lines(FILE *old, FILE *out, int64_t kept_steps) {
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, old)) > 0) {
        bool complete = line[length - 1] == '\n'; /* a killed run may have left half a line */
        long long step = complete ? line_step(line) : -1;
        if (step >= 0 && step <= kept_steps) fputs(line, out);
    }
    free(line);
}

gc_status gc_run_log_open(gc_run_log *log, const char *path, int64_t kept_steps) {
    *log = (gc_run_log){0};
    /* The kept lines go to a new file that replaces the log whole: a crash while cutting
     * it leaves the old log, never half of one. */
    gc_file_writer out;
    gc_status status = gc_file_begin(&out, path);
    if (status != GC_OK) return status;
    FILE *old = kept_steps > 0 ? fopen(path, "r") : NULL;
    if (old) {
        copy_kept_lines(old, out.file, kept_steps);
        fclose(old);
    }
    status = gc_file_commit(&out);
    if (status != GC_OK) return status;
    log->file = fopen(path, "a");
    if (!log->file) return io_error(path, "open for appending");
    log->path = strdup(path);
    if (!log->path) gc_fatal("run_log: out of host memory");
    return GC_OK;
}

/* A JSON number, or null for what JSON cannot write (a loss that became nan or inf). */
static void print_number(FILE *out, const char *key, double value) {
    char text[32];
    if (isfinite(value)) fprintf(out, ",\"%s\":%s", key, gc_format_exact(value, text, sizeof text));
    else fprintf(out, ",\"%s\":null", key);
}

/* Several datasets: the step's (index and name), and at a logging point each one's mean loss. */
static void print_dataset(FILE *out, const gc_step_record *r) {
    gc_json_text name = {0};
    gc_json_append_string(&name, r->dataset_name);
    if (name.failed) gc_fatal("run_log: out of host memory for a dataset's name");
    fprintf(out, ",\"dataset\":%d,\"dataset_name\":%.*s", r->dataset, (int)name.length, name.bytes);
    gc_json_text_free(&name);
    if (!r->dataset_losses) return;
    for (int d = 0; d < r->datasets; d++) {
        char text[32];
        const char *mean = isfinite(r->dataset_losses[d]) ? gc_format_exact(r->dataset_losses[d], text, sizeof text)
                                                           : "null";
        fprintf(out, "%s%s", d ? "," : ",\"dataset_losses\":[", mean);
    }
    fputc(']', out);
}

gc_status gc_run_log_append(gc_run_log *log, const gc_step_record *r) {
    /* the values a step computes are written exactly, so that the logs of a resumed run and of
     * a straight one compare byte for byte (the timings aside) */
    fprintf(log->file, "{\"step\":%lld,\"epoch\":%lld", (long long)r->step, (long long)r->epoch);
    print_number(log->file, "loss", r->loss);
    print_number(log->file, "lr", r->lr);
    print_number(log->file, "grad_norm", r->grad_norm);
    fprintf(log->file,
            ",\"examples_per_second\":%.1f,\"peak_bytes\":%zu,\"packed_bytes\":%zu,\"chunk_sizes\":[%lld,%lld]",
            r->examples_per_second, r->peak_bytes, r->packed_bytes, (long long)r->chunk_sizes[0],
            (long long)r->chunk_sizes[1]);
    print_number(log->file, "loss_scale", r->loss_scale);
    fprintf(log->file, ",\"skipped\":%s,\"global_loss\":\"%s\"", r->skipped ? "true" : "false", r->global_loss);
    if (r->datasets > 1) print_dataset(log->file, r);
    fprintf(log->file, ",\"seconds\":%.6f}\n", r->seconds);
    if (fflush(log->file) != 0) return io_error(log->path, "append to");
    return GC_OK;
}

gc_status gc_run_log_append_eval(gc_run_log *log, const gc_eval_record *r) {
    fprintf(log->file, "{\"eval\":{\"step\":%lld", (long long)r->step);
    for (int i = 0; i < r->count; i++) print_number(log->file, r->names[i], r->values[i]);
    fprintf(log->file, ",\"queries\":%lld,\"metric\":\"%s\",\"best\":%s,\"best_step\":%lld", (long long)r->queries,
            r->names[r->metric], r->best ? "true" : "false", (long long)r->best_step);
    print_number(log->file, "best_value", r->best_value);
    fprintf(log->file, ",\"since_best\":%lld,\"early_stop\":%s,\"seconds\":%.6f}}\n", (long long)r->since_best,
            r->stopped ? "true" : "false", r->seconds);
    if (fflush(log->file) != 0) return io_error(log->path, "append to");
    return GC_OK;
}

void gc_run_log_close(gc_run_log *log) {
    if (log->file) fclose(log->file);
    free(log->path);
    *log = (gc_run_log){0};
}
