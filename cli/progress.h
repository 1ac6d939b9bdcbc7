/* Training progress on stderr. On a terminal, one line redrawn in place after every step:
 *   step 120/500 [=====>       ] loss 2.3141 | 812.4 ex/s | peak 41.2 MiB + packed 3.1 MiB of 15.1 GiB | ETA 0:00:31
 * Otherwise (a pipe, a file, a CI log) a plain line every `log_every` steps and at the last:
 *   step 120/500 epoch 2 loss 2.3141 lr 0.00042 812.4 ex/s peak 41.2 MiB + packed 3.1 MiB of 15.1 GiB ETA 31 s
 * ("+ packed ...": the weights' packed GEMM panels, when the step kept any; "of ...": the memory
 * limit the step's peak and the panels are held to, when there is one). */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/train.h"

typedef struct cli_progress {
    FILE *out;
    bool terminal;
    int64_t total_steps, log_every;
    size_t limit_bytes; /* the device's memory limit; 0: none */
    int64_t first_step; /* the step this run started after (a resumed run's checkpoint) */
    int64_t stop_step;  /* the step it stops after (set by cli_progress_plan; 0: no plan printed) */
    double seconds;     /* spent by this run's steps so far: the ETA's rate */
    bool line_open;     /* a redrawn line awaits its newline */
} cli_progress;

void cli_progress_begin(cli_progress *progress, FILE *out, int64_t first_step, int64_t total_steps, int64_t log_every,
                        size_t limit_bytes);
/* The run's plan, one line printed at once (what a step is, how many this run takes, an
 * epoch's size), so that a long run says so before its first step ends:
 *   plan: steps 1-20 of 20, each 512 pairs (1 batch of 512 in chunks of 32/32, 1 process); an epoch: 86000 pairs, 168 steps
 * and, after this run's first step, its time and what the run's steps take at that pace:
 *   step 1 took 7.2 s: the 20 steps take about 2.4 min */
void cli_progress_plan(cli_progress *progress, const gc_trainer_info *info, const gc_trainer_config *config);
void cli_progress_step(cli_progress *progress, const gc_step_record *record);
/* Ends a redrawn line; call before printing anything else and at the end. */
void cli_progress_end(cli_progress *progress);

#endif
