/* Training progress (see progress.h). */
#include <string.h>
#include <unistd.h>

#include "gradcache/train.h"
#include "progress.h"

enum { BAR_WIDTH = 20 };

void cli_progress_begin(cli_progress *progress, FILE *out, int64_t first_step, int64_t total_steps, int64_t log_every,
                        size_t limit_bytes) {
    *progress = (cli_progress){.out = out,
                              .terminal = isatty(fileno(out)),
                              .total_steps = total_steps,
                              .log_every = log_every,
                              .limit_bytes = limit_bytes,
                              .first_step = first_step};
}

void cli_progress_plan(cli_progress *progress, const gc_trainer_info *info, const gc_trainer_config *config) {
    int64_t batches = config->accumulate > 1 ? config->accumulate : 1;
    char chunks[64] = "";
    if (info->chunk_sizes[0])
        snprintf(chunks, sizeof chunks, " in chunks of %lld/%lld", (long long)info->chunk_sizes[0],
                 (long long)info->chunk_sizes[1]);
    fprintf(progress->out,
            "plan: steps %lld-%lld of %lld, each %lld pairs (%lld batch%s of %lld%s, %d process%s); an epoch: %lld "
            "pairs, %lld steps\n",
            (long long)info->step + 1, (long long)info->stop_step, (long long)info->total_steps,
            (long long)(config->batch_size * batches), (long long)batches, batches == 1 ? "" : "es",
            (long long)config->batch_size, chunks, info->world, info->world == 1 ? "" : "es",
            (long long)info->examples_per_epoch, (long long)info->steps_per_epoch);
    fflush(progress->out);
    progress->stop_step = info->stop_step;
}

/* A duration in the unit a reader takes in at a glance. */
static void format_duration(double seconds, char *out, size_t size) {
    if (seconds < 120) snprintf(out, size, "%.0f s", seconds);
    else if (seconds < 7200) snprintf(out, size, "%.1f min", seconds / 60);
    else snprintf(out, size, "%.1f h", seconds / 3600);
}

/* After this run's first step: its time, and the run's at that pace. */
static void print_estimate(const cli_progress *progress, const gc_step_record *r) {
    char total[32];
    int64_t steps = progress->stop_step - progress->first_step;
    format_duration(r->seconds * (double)steps, total, sizeof total);
    fprintf(progress->out, "step %lld took %.1f s: the %lld %s about %s\n", (long long)r->step, r->seconds,
            (long long)steps, steps == 1 ? "step takes" : "steps take", total);
    fflush(progress->out);
}

/* Seconds left at this run's average step time. */
static double eta_seconds(const cli_progress *progress, int64_t step) {
    int64_t done = step - progress->first_step;
    return done > 0 ? progress->seconds / (double)done * (double)(progress->total_steps - step) : 0;
}

static void draw_bar(cli_progress *progress, const gc_step_record *r, const char *peak) {
    char bar[BAR_WIDTH + 1];
    int filled = (int)(BAR_WIDTH * r->step / (progress->total_steps > 0 ? progress->total_steps : 1));
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
    bar[BAR_WIDTH] = '\0';
    long eta = (long)(eta_seconds(progress, r->step) + 0.5);
    /* \033[K clears what a longer previous line left on the right */
    fprintf(progress->out, "\rstep %lld/%lld [%s] loss %.4f | %.1f ex/s | peak %s | ETA %ld:%02ld:%02ld\033[K",
            (long long)r->step, (long long)progress->total_steps, bar, r->loss, r->examples_per_second, peak,
            eta / 3600, eta / 60 % 60, eta % 60);
    fflush(progress->out);
    progress->line_open = true;
}

void cli_progress_step(cli_progress *progress, const gc_step_record *r) {
    progress->seconds += r->seconds;
    char peak[96], limit[32], packed[32];
    gc_format_bytes((double)r->peak_bytes, peak, sizeof peak);
    if (r->packed_bytes) /* the limit holds them too */
        snprintf(peak + strlen(peak), sizeof peak - strlen(peak), " + packed %s",
                 gc_format_bytes((double)r->packed_bytes, packed, sizeof packed));
    if (progress->limit_bytes)
        snprintf(peak + strlen(peak), sizeof peak - strlen(peak), " of %s",
                 gc_format_bytes((double)progress->limit_bytes, limit, sizeof limit));
    if (progress->stop_step && r->step == progress->first_step + 1) print_estimate(progress, r);
    if (progress->terminal) {
        draw_bar(progress, r, peak);
    } else if (r->step % progress->log_every == 0 || r->step == progress->total_steps) {
        fprintf(progress->out, "step %lld/%lld epoch %lld loss %.4f lr %.3g %.1f ex/s peak %s ETA %.0f s\n",
                (long long)r->step, (long long)progress->total_steps, (long long)r->epoch, r->loss, r->lr,
                r->examples_per_second, peak, eta_seconds(progress, r->step));
        fflush(progress->out);
    }
}

void cli_progress_end(cli_progress *progress) {
    if (progress->line_open) fputc('\n', progress->out);
    progress->line_open = false;
}
