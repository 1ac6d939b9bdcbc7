/* What activation checkpointing (gc_text_encoder.checkpoint_layers) saves and costs in a
 * GradCache step, from the library's exact accounting (gc_memory_get_stats, on the CPU): the
 * peak of the chunks' second forward and backward (the cache report's backward_peak_bytes:
 * parameters, gradients and cache included, so the difference between the two rows is the
 * chunk's activations alone), the whole step's peak, and the median step time, with and
 * without, the same batch and dropout state each time. No optimizer: its state adds the same to
 * both. Not a test: run by hand.
 *
 *   bench_checkpoint_layers [--init DIR] [--batch 256] [--chunk 32] [--length 64] [--reps 3]
 *
 * Without --init, the trainer's `small` preset (two towers, byte tokens); with it, that
 * pretrained folder as one tied encoder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

typedef struct options {
    const char *init;
    int64_t batch, chunk, length;
    int reps;
} options;

static options parse(int argc, char **argv) {
    options o = {NULL, 256, 32, 64, 3};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--init")) o.init = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) o.batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk")) o.chunk = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--length")) o.length = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) o.reps = atoi(argv[i + 1]);
        else break;
    }
    if (argc % 2 == 0 || o.batch < 1 || o.chunk < 1 || o.length < 2 || o.reps < 1 || o.reps > GC_BENCH_MAX_REPS) {
        fprintf(stderr, "usage: bench_checkpoint_layers [--init DIR] [--batch B] [--chunk C] [--length T] "
                        "[--reps 1..%d]\n", GC_BENCH_MAX_REPS);
        exit(2);
    }
    return o;
}

static size_t mib_tenths(size_t bytes) { return (bytes * 10 + (1 << 19)) >> 20; }

/* One row: `reps` steps from the same seed; the largest peaks and the median time. */
static void measure(gc_bench_setup *setup, const gc_bench_batch *data, const options *o, bool checkpoint) {
    for (int side = 0; side < 2; side++) gc_dual_encoder_tower(&setup->model, side)->checkpoint_layers = checkpoint;
    gc_cache_config config = gc_bench_cache_config(setup, o->chunk);
    gc_cache *cache = gc_cache_new(&config);
    double seconds[GC_BENCH_MAX_REPS], loss = 0;
    size_t chunk_peak = 0, step_peak = 0;
    for (int run = 0; run < o->reps; run++) {
        gc_param_list_zero_grad(&setup->model.params);
        gc_manual_seed(7);
        gc_memory_reset_peak(gc_cpu());
        gc_cache_report report = {0};
        double start = gc_seconds();
        if (gc_cache_step(cache, data->inputs, &loss, &report) != GC_OK) {
            fprintf(stderr, "bench_checkpoint_layers: %s\n", gc_last_error());
            exit(1);
        }
        seconds[run] = gc_seconds() - start;
        size_t peak = report.forward_peak_bytes > report.loss_peak_bytes ? report.forward_peak_bytes
                                                                          : report.loss_peak_bytes;
        if (report.backward_peak_bytes > peak) peak = report.backward_peak_bytes;
        if (report.backward_peak_bytes > chunk_peak) chunk_peak = report.backward_peak_bytes;
        if (peak > step_peak) step_peak = peak;
    }
    printf("| %s | %zu (%zu.%zu MiB) | %zu (%zu.%zu MiB) | %.0f | %.9g |\n", checkpoint ? "on" : "off", chunk_peak,
           mib_tenths(chunk_peak) / 10, mib_tenths(chunk_peak) % 10, step_peak, mib_tenths(step_peak) / 10,
           mib_tenths(step_peak) % 10, 1e3 * gc_median(seconds, o->reps), loss);
    gc_param_list_zero_grad(&setup->model.params);
    gc_cache_free(cache);
}

int main(int argc, char **argv) {
    options o = parse(argc, argv);
    gc_bench_setup setup;
    gc_text_encoder_config small = gc_model_preset(1, o.length); /* the trainer's `small` */
    gc_status status = o.init ? gc_bench_setup_from_folder(&setup, o.init, o.length, GC_F32, 0, gc_cpu())
                              : gc_bench_setup_init(&setup, &small, false, 0, gc_cpu());
    gc_bench_batch data;
    if (status != GC_OK || gc_bench_batch_make(&setup, o.batch, &data) != GC_OK) {
        fprintf(stderr, "bench_checkpoint_layers: %s\n", gc_last_error());
        return 1;
    }
    printf("%s, %lld pairs of %lld tokens, chunks of %lld, f32, median of %d steps\n\n",
           o.init ? o.init : "the small preset", (long long)o.batch, (long long)o.length, (long long)o.chunk, o.reps);
    printf("| checkpointing | chunk peak, bytes | step peak, bytes | step ms | loss |\n|---|---|---|---|---|\n");
    measure(&setup, &data, &o, false);
    measure(&setup, &data, &o, true);
    gc_bench_batch_free(&data);
    gc_bench_setup_free(&setup);
    gc_shutdown();
    return 0;
}
