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
