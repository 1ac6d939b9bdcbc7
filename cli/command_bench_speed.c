/* gradcache bench speed: the step time of GradCache against the plain step at the same
 * batch, for several chunk sizes, and the ratios next to the theory's. */
#include <stdio.h>

#include "bench_commands.h"
#include "int_list.h"

static void print_speed_row(const char *mode, int64_t chunk, const gc_bench_result *run, const gc_bench_result *plain) {
    printf("  %-6s %7lld %10.2f %11.2f", mode, (long long)chunk, run->step_ms, run->step_ms / plain->step_ms);
    if (run != plain)
        printf(" %11.2f %16.2f", run->forward_ms, 1 + run->forward_ms / plain->step_ms);
    putchar('\n');
}

/* Measures one run; 0, or 1 after printing why it could not be measured. */
static int measure(gc_bench_setup *setup, int64_t batch, int64_t chunk, int warmup, int reps, gc_bench_result *run) {
    *run = gc_bench_measure(setup, batch, chunk, warmup, reps);
    if (run->status == GC_OK) return 0;
    fprintf(stderr, "gradcache bench speed: batch %lld, %s: %s\n", (long long)batch, chunk ? "GradCache" : "plain",
            gc_last_error());
    return 1;
}

static int speed(const gc_bench_model_options *model, gc_device device, int64_t batch, const gc_int_list *chunks,
                 int warmup, int reps, bool keep_last_graph) {
    gc_bench_setup setup;
    if (gc_bench_setup_init(&setup, model, GC_F32, device) != GC_OK) {
        fprintf(stderr, "gradcache bench speed: the model: %s\n", gc_last_error());
        return 1;
    }
    setup.keep_last_graph = keep_last_graph;
    char model_text[200], device_text[16];
    printf("gradcache bench speed: %s, batch %lld, %s, median of %d steps after %d warm-up%s\n",
           gc_bench_model_describe(model, model_text, sizeof model_text), (long long)batch,
           gc_device_str(device, device_text, sizeof device_text), reps, warmup,
           keep_last_graph ? ", keeping the last chunk's graph" : "");
    printf("  %-6s %7s %10s %11s %11s %16s\n", "mode", "chunk", "step ms", "time/plain", "forward ms",
           "1+forward/plain");
    gc_bench_result plain, run;
    int status = measure(&setup, batch, 0, warmup, reps, &plain);
    if (status == 0) print_speed_row("plain", batch, &plain, &plain);
    for (int c = 0; c < chunks->count && status == 0; c++) {
        if (chunks->values[c] > batch) continue;
        status = measure(&setup, batch, chunks->values[c], warmup, reps, &run);
        if (status == 0) print_speed_row("gc", chunks->values[c], &run, &plain);
        fflush(stdout);
    }
    if (status == 0)
        printf("theory: GradCache = plain + one graph-less forward, about 4/3 of the plain step when a backward\n"
               "costs two forwards; '1+forward/plain' is that prediction from the measured forward.\n");
    gc_bench_setup_free(&setup);
    return status;
}

int gc_command_bench_speed(int argc, char **argv) {
    gc_bench_model_options model = {.dim = 32, .layers = 2, .heads = 4, .hidden = 64, .max_length = 16, .dropout = 0.1};
    int64_t batch = 256, reps = 3, warmup = 1;
    bool keep_last_graph = false;
    const char *chunk_text = "16,32,64,128";
    gc_flag flags[] = {
        {"batch-size", GC_FLAG_INT, &batch, 1, 1 << 20, NULL, "query/passage pairs per step"},
        {"chunks", GC_FLAG_STRING, &chunk_text, 0, 0, NULL, "GradCache chunk sizes, comma-separated"},
        {"reps", GC_FLAG_INT, &reps, 1, GC_BENCH_MAX_REPS, NULL, "measured steps per run (median time)"},
        {"warmup", GC_FLAG_INT, &warmup, 0, 100, NULL, "unmeasured steps before them"},
        {"keep-last-graph", GC_FLAG_BOOL, &keep_last_graph, 0, 0, NULL,
         "GradCache keeps each model's last chunk's graph from the first pass (one forward fewer)"},
        GC_BENCH_MODEL_FLAGS(model),
    };
    int parsed = gc_flags_parse("bench speed",
                                "Step time of Gradient Cache against the plain step at the same batch, for each chunk\n"
                                "size (larger than the batch: skipped), and the ratios. Synthetic texts.",
                                flags, (int)(sizeof flags / sizeof *flags), argc, argv, 3);
    if (parsed) return parsed == 1 ? 0 : parsed;
    gc_int_list chunks;
    gc_device device;
    int usage = gc_int_list_parse("bench speed", "chunks", chunk_text, 1, 1 << 20, &chunks);
    if (!usage) usage = gc_bench_model_check("bench speed", &model, &device);
    if (usage) return usage;
    return speed(&model, device, batch, &chunks, (int)warmup, (int)reps, keep_last_graph);
}
