/* gradcache bench speed: the step time of GradCache against the plain step at the same
 * batch, for several chunk sizes, and the ratios next to the theory's; with several
 * --precision values, each measured in the same run, with the time against f32's. */
#include <stdio.h>

#include "bench_commands.h"
#include "flags.h"
#include "gradcache/train.h"
#include "int_list.h"

/* One row; f32 is the same run in f32 (NULL when f32 was not measured, or is this one). */
static void print_speed_row(int precision, const char *mode, int64_t chunk, const gc_bench_result *run,
                            const gc_bench_result *plain, const gc_bench_result *f32) {
    printf("  %-5s %-6s %7lld %10.2f %11.2f", cli_precision_names[precision], mode, (long long)chunk, run->step_ms,
           run->step_ms / plain->step_ms);
    if (f32) printf(" %9.2f", run->step_ms / f32->step_ms);
    else printf(" %9s", "-");
    if (run != plain) printf(" %11.2f %16.2f", run->forward_ms, 1 + run->forward_ms / plain->step_ms);
    putchar('\n');
}

/* What the command measures (its flags). */
typedef struct speed_options {
    cli_bench_model_options model;
    gc_device device;
    gc_mem_limit limit;
    int64_t batch, reps, warmup;
    cli_int_list chunks;
    int precisions[CLI_PRECISION_COUNT], n_precisions;
    bool keep_last_graph; /* GradCache keeps each model's last chunk's graph (one forward fewer) */
} speed_options;

/* One line on stderr, "gradcache bench speed: WHAT: the last error", and where the memory
 * limit came from when it was that; returns 1. */
static int fail_measuring(const speed_options *o, const char *what) {
    char hint[sizeof o->limit.source + 16];
    fprintf(stderr, "gradcache bench speed: %s: %s%s\n", what, gc_last_error(),
            gc_mem_limit_hint(&o->limit, gc_last_status(), hint, sizeof hint));
    return 1;
}

/* Measures one run; 0, or 1 after printing why it could not be measured. */
static int measure(const speed_options *o, gc_bench_setup *setup, int64_t chunk, gc_bench_result *run) {
    *run = gc_bench_measure(setup, o->batch, chunk, (int)o->warmup, (int)o->reps);
    if (run->status == GC_OK) return 0;
    char what[64];
    snprintf(what, sizeof what, "batch %lld, %s", (long long)o->batch, chunk ? "GradCache" : "plain");
    return fail_measuring(o, what);
}

/* The plain step and each chunk size in one precision: runs[0] plain, runs[1 + c] chunk c.
 * f32_runs: the same in f32 when measured before (NULL otherwise). 0, or 1 after a line. */
static int speed_in(int precision, const speed_options *o, gc_bench_result *runs, const gc_bench_result *f32_runs) {
    const cli_int_list *chunks = &o->chunks;
    int64_t batch = o->batch;
    gc_bench_setup setup;
    if (cli_bench_model_setup(&setup, &o->model, cli_precision_dtype(precision), o->device) != GC_OK) {
        char what[32];
        snprintf(what, sizeof what, "the model in %s", cli_precision_names[precision]);
        return fail_measuring(o, what);
    }
    setup.keep_last_graph = o->keep_last_graph;
    int status = measure(o, &setup, 0, &runs[0]);
    if (status == 0) print_speed_row(precision, "plain", batch, &runs[0], &runs[0], f32_runs);
    for (int c = 0; c < chunks->count && status == 0; c++) {
        if (chunks->values[c] > batch) continue;
        status = measure(o, &setup, chunks->values[c], &runs[1 + c]);
        if (status == 0)
            print_speed_row(precision, "gc", chunks->values[c], &runs[1 + c], &runs[0], f32_runs ? &f32_runs[1 + c] : NULL);
        fflush(stdout);
    }
    gc_bench_setup_free(&setup);
    return status;
}

static int speed(const speed_options *o) {
    char model_text[200], device_text[16], limit_text[sizeof o->limit.source + 64];
    printf("gradcache bench speed: %s, batch %lld, %s, median of %lld steps after %lld warm-up%s\n",
           cli_bench_model_describe(&o->model, model_text, sizeof model_text), (long long)o->batch,
           gc_device_str(o->device, device_text, sizeof device_text), (long long)o->reps, (long long)o->warmup,
           o->keep_last_graph ? ", keeping the last chunk's graph" : "");
    printf("memory limit: %s\n", gc_mem_limit_describe(&o->limit, o->device, limit_text, sizeof limit_text));
    printf("  %-5s %-6s %7s %10s %11s %9s %11s %16s\n", "prec", "mode", "chunk", "step ms", "time/plain", "time/f32",
           "forward ms", "1+forward/plain");
    gc_bench_result runs[CLI_PRECISION_COUNT][1 + CLI_INT_LIST_MAX];
    const gc_bench_result *f32_runs = NULL;
    int status = 0;
    for (int p = 0; p < o->n_precisions && status == 0; p++) {
        int precision = o->precisions[p];
        status = speed_in(precision, o, runs[p], f32_runs);
        if (precision == CLI_PRECISION_F32) f32_runs = runs[p];
    }
    if (status == 0)
        printf("theory: GradCache = plain + one graph-less forward, about 4/3 of the plain step when a backward\n"
               "costs two forwards; '1+forward/plain' is that prediction from the measured forward. 'time/f32':\n"
               "against the same step in f32 (measured first: list f32 first in --precision to get it).\n");
    return status;
}

int cli_command_bench_speed(int argc, char **argv) {
    speed_options o = {.model = {.dim = 32, .layers = 2, .heads = 4, .hidden = 64, .max_length = 16, .dropout = 0.1},
                       .batch = 256,
                       .reps = 3,
                       .warmup = 1};
    size_t mem_limit = 0;
    const char *chunk_text = "16,32,64,128", *precision_text = "f32";
    cli_flag flags[] = {
        {"batch-size", CLI_FLAG_INT, &o.batch, 1, 1 << 20, NULL, "query/passage pairs per step"},
        {"chunks", CLI_FLAG_STRING, &chunk_text, 0, 0, NULL, "GradCache chunk sizes, comma-separated"},
        {"reps", CLI_FLAG_INT, &o.reps, 1, GC_BENCH_MAX_REPS, NULL, "measured steps per run (median time)"},
        {"warmup", CLI_FLAG_INT, &o.warmup, 0, 100, NULL, "unmeasured steps before them"},
        {"precision", CLI_FLAG_STRING, &precision_text, 0, 0, NULL,
         "the model's dtypes, comma-separated, each measured in turn: f32, f16, bf16"},
        {"mem-limit", CLI_FLAG_SIZE, &mem_limit, 0, 0, NULL,
         "a byte limit on the device's memory, e.g. 512M (default: GC_MEM_LIMIT's, else on the CPU 2/3 of the "
         "memory available at the start)"},
        {"keep-last-graph", CLI_FLAG_BOOL, &o.keep_last_graph, 0, 0, NULL,
         "GradCache keeps each model's last chunk's graph from the first pass (one forward fewer)"},
        CLI_BENCH_MODEL_FLAGS(o.model),
    };
    int parsed = cli_flags_parse("bench speed",
                                 "Step time of Gradient Cache against the plain step at the same batch, for each chunk\n"
                                 "size (larger than the batch: skipped), and the ratios. Synthetic texts.",
                                 flags, (int)(sizeof flags / sizeof *flags), argc, argv, 3);
    if (parsed) return parsed == 1 ? 0 : parsed;
    int usage = cli_int_list_parse("bench speed", "chunks", chunk_text, 1, 1 << 20, &o.chunks);
    o.n_precisions = usage ? 0 : cli_precision_list_parse("bench speed", precision_text, o.precisions);
    if (o.n_precisions < 0) usage = 2;
    if (!usage) usage = cli_bench_model_check("bench speed", &o.model, &o.device);
    for (int p = 0; p < o.n_precisions && !usage; p++)
        usage = cli_precision_check_device("bench speed", o.precisions[p], o.device);
    if (usage) return usage;
    o.limit = gc_mem_limit_apply(o.device, mem_limit, 1);
    return speed(&o);
}
