/* The two benchmarks behind `gradcache bench` (each gets the whole argv; its flags begin at
 * argv[3]) and what the memory benchmark's outputs are made of. */
#ifndef CLI_BENCH_COMMANDS_H
#define CLI_BENCH_COMMANDS_H

#include <stdio.h>

#include "bench_model.h"
#include "gradcache/measure.h"

int cli_command_bench_memory(int argc, char **argv);
int cli_command_bench_speed(int argc, char **argv);

/* One measured configuration of the memory benchmark. */
typedef struct cli_memory_row {
    bool plain;            /* the plain step (chunk = batch) or GradCache */
    int64_t batch, chunk;
    gc_contrastive_method loss; /* GradCache: TILED or FULL; the plain step is always FULL */
    gc_bench_result result; /* status GC_OK, or the memory error of a run that does not fit */
} cli_memory_row;

/* "tiled" or "full". */
const char *cli_memory_loss_name(gc_contrastive_method loss);

/* The rows as CSV: mode,batch,chunk,loss,peak_bytes,cache_bytes,packed_bytes,workspace_bytes,
 * step_ms,fits (a run that does not fit has fits 0 and empty measurements; the plain step has
 * no cache: 0; packed_bytes, the weights' kept GEMM panels, and workspace_bytes, the library's
 * own device memory (the cuBLAS workspace), are outside peak_bytes). */
void cli_memory_rows_write_csv(FILE *out, const cli_memory_row *rows, int count);
/* The rows as an SVG chart of peak bytes against the batch (log scale): one line for the
 * plain step, one per chunk size and loss; limit_bytes > 0 draws the memory limit. */
void cli_memory_rows_write_svg(FILE *out, const cli_memory_row *rows, int count, const char *title,
                               const char *subtitle, size_t limit_bytes);

#endif
