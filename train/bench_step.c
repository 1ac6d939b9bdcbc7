/* A training step measured: the model, synthetic batches, time and peak memory (see
 * gradcache/measure.h). */
#include <stdlib.h>

#include "gradcache/clock.h"
#include "gradcache/measure.h"
#include "gradcache/memory.h"

/* Cosine at BERT-style retrieval's usual temperature: the scores and gradients of a real
 * training step, so the comparisons see realistic magnitudes. */
#define GC_BENCH_TEMPERATURE 0.05

/* Everything but the model. */
static gc_bench_setup setup_without_model(gc_dtype dtype, int64_t max_length, uint64_t seed, gc_device device) {
    gc_manual_seed(seed);
    return (gc_bench_setup){.device = device,
                            .dtype = dtype,
                            .max_length = max_length,
                            .loss = {.similarity = GC_SIMILARITY_COSINE, .temperature = GC_BENCH_TEMPERATURE},
                            /* another stream than the initialisation's (seed), for the data */
                            .data = {seed + 1, 0}};
}

gc_status gc_bench_setup_init(gc_bench_setup *setup, const gc_text_encoder_config *config, bool tied, uint64_t seed,
                              gc_device device) {
    *setup = setup_without_model(config->dtype, config->max_length, seed, device);
    return gc_dual_encoder_init(&setup->model, config, tied, device, seed);
}

gc_status gc_bench_setup_from_folder(gc_bench_setup *setup, const char *dir, int64_t max_length, gc_dtype dtype,
                                     uint64_t seed, gc_device device) {
    *setup = setup_without_model(dtype, max_length, seed, device);
    return gc_dual_encoder_from_folder(&setup->model, dir, max_length, dtype, device);
}

void gc_bench_setup_free(gc_bench_setup *setup) { gc_dual_encoder_free(&setup->model); }

gc_status gc_bench_batch_make(gc_bench_setup *setup, int64_t rows, gc_bench_batch *batch) {
    *batch = (gc_bench_batch){0};
    gc_status status = GC_OK;
    for (int side = 0; side < 2 && status == GC_OK; side++) {
        gc_tensor **ids = &batch->tensors[2 * side], **mask = &batch->tensors[2 * side + 1];
        status = gc_synthetic_tokens(setup->model.tokenizer, rows, setup->max_length, setup->dtype, setup->device,
                                     &setup->data, ids, mask);
        batch->inputs[side] = (gc_batch){2, {"ids", "mask"}, {*ids, *mask}};
    }
    if (status != GC_OK) gc_bench_batch_free(batch);
    return status;
}

void gc_bench_batch_free(gc_bench_batch *batch) {
    for (int i = 0; i < 4; i++) gc_tensor_release(batch->tensors[i]);
    *batch = (gc_bench_batch){0};
}

gc_cache_config gc_bench_cache_config(gc_bench_setup *setup, int64_t chunk_size) {
    gc_cache_config config = {.n_models = 2, .loss = gc_contrastive_loss_fn(&setup->loss),
                              .keep_last_graph = setup->keep_last_graph};
    for (int side = 0; side < 2; side++)
        config.models[side] = (gc_cached_model){gc_dual_encoder_tower(&setup->model, side), gc_dual_encoder_forward_train,
                                                chunk_size, &setup->model.params};
    return config;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double gc_median(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return values[n / 2];
}

static size_t largest(size_t a, size_t b) { return a > b ? a : b; }

gc_bench_result gc_bench_measure(gc_bench_setup *setup, int64_t batch, int64_t chunk_size, int warmup, int reps) {
    if (reps < 1 || reps > GC_BENCH_MAX_REPS || warmup < 0)
        gc_fatal("bench_measure: %d repetitions (1 to %d) after %d warm-ups", reps, GC_BENCH_MAX_REPS, warmup);
    gc_bench_result result = {0};
    double step_seconds[GC_BENCH_MAX_REPS], forward_seconds[GC_BENCH_MAX_REPS];
    gc_bench_batch data;
    result.status = gc_bench_batch_make(setup, batch, &data);
    /* The plain step runs its forward as one chunk: chunk size = batch. */
    gc_cache_config config = gc_bench_cache_config(setup, chunk_size ? chunk_size : batch);
    gc_cache *cache = gc_cache_new(&config);
    for (int run = 0; run < warmup + reps && result.status == GC_OK; run++) {
        gc_param_list_zero_grad(&setup->model.params);
        gc_device_synchronize(setup->device);
        gc_memory_reset_peak(setup->device);
        gc_cache_report report = {0};
        double loss, start = gc_seconds();
        result.status = chunk_size ? gc_cache_step(cache, data.inputs, &loss, &report)
                                   : gc_cache_full_batch_step(cache, data.inputs, &loss);
        gc_device_synchronize(setup->device);
        double seconds = gc_seconds() - start;
        /* The report resets the peak at each phase, so the step's peak is the largest of the
         * phases' (for the plain step, which has no report, the counter's). */
        size_t peak = largest(gc_memory_get_stats(setup->device).peak_bytes,
                              largest(report.forward_peak_bytes,
                                      largest(report.loss_peak_bytes, report.backward_peak_bytes)));
        result.peak_bytes = largest(result.peak_bytes, peak);
        /* panels only grow during a step (made at a form's second product, freed with the
         * weights), so the peak since the last phase's reset is the step's */
        result.packed_bytes = largest(result.packed_bytes, gc_memory_get_stats(setup->device).peak_packed_bytes);
        result.cache_bytes = report.cache_bytes;
        result.workspace_bytes = gc_memory_get_stats(setup->device).workspace_bytes;
        if (run >= warmup) {
            step_seconds[run - warmup] = seconds;
            forward_seconds[run - warmup] = report.forward_seconds;
        }
    }
    /* A failed step leaves partial sums, a finished one gradients nobody reads: neither may
     * count in the next measurement's live bytes. */
    gc_param_list_zero_grad(&setup->model.params);
    gc_cache_free(cache);
    gc_bench_batch_free(&data);
    if (result.status == GC_OK) {
        result.step_ms = 1e3 * gc_median(step_seconds, reps);
        result.forward_ms = 1e3 * gc_median(forward_seconds, reps);
    }
    return result;
}
