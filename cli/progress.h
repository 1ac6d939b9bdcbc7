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
    double seconds;     /* spent by this run's steps so far: the ETA's rate */
    bool line_open;     /* a redrawn line awaits its newline */
} cli_progress;

void cli_progress_begin(cli_progress *progress, FILE *out, int64_t first_step, int64_t total_steps, int64_t log_every,
                        size_t limit_bytes);
void cli_progress_step(cli_progress *progress, const gc_step_record *record);
/* Ends a redrawn line; call before printing anything else and at the end. */
void cli_progress_end(cli_progress *progress);

#endif
