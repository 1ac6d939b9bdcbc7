/* What verify and the benchmarks share: a model on a device with its loss, synthetic
 * query/passage batches, the GradCache configuration, and the measurement of one kind of
 * step (time and peak memory). */
#ifndef GC_CLI_BENCH_STEP_H
#define GC_CLI_BENCH_STEP_H

#include "bench_model.h"
#include "model.h"

#define GC_BENCH_MAX_REPS 100

typedef struct gc_bench_setup {
    gc_dual_encoder model;
    gc_device device;
    gc_dtype dtype;
    int64_t max_length;
    gc_contrastive_options loss; /* in-batch InfoNCE, cosine similarity; its method is the caller's */
    gc_generator data;           /* where synthetic batches are drawn from */
    bool keep_last_graph;        /* GradCache keeps each model's last chunk's graph (cache.h) */
} gc_bench_setup;

/* Seeds every device's default generator (dropout) with options->seed and builds the model.
 * GC_OK, or the allocation error (a memory limit too small for the model itself). */
gc_status gc_bench_setup_init(gc_bench_setup *setup, const gc_bench_model_options *options, gc_dtype dtype,
                              gc_device device);
void gc_bench_setup_free(gc_bench_setup *setup);

/* `rows` synthetic query/passage pairs: inputs[0] the queries and inputs[1] the passages,
 * each {ids i32 [rows, max_length], mask [rows, max_length]}. */
typedef struct gc_bench_batch {
    gc_tensor *tensors[4]; /* query ids, query mask, passage ids, passage mask */
    gc_batch inputs[2];
} gc_bench_batch;

gc_status gc_bench_batch_make(gc_bench_setup *setup, int64_t rows, gc_bench_batch *batch);
void gc_bench_batch_free(gc_bench_batch *batch);

/* GradCache over the two towers (the same one twice when tied), each in chunks of
 * chunk_size rows. Every model lists all the parameters (verify counts each tensor once). */
gc_cache_config gc_bench_cache_config(gc_bench_setup *setup, int64_t chunk_size);

typedef struct gc_bench_result {
    gc_status status;  /* GC_OK, or the memory error that stopped a step */
    size_t peak_bytes; /* the device's highest live bytes during a step, parameters included */
    double step_ms;    /* median over the measured steps */
    double forward_ms; /* GradCache: median time of the first, graph-less forward pass */
    size_t cache_bytes; /* GradCache: the representations and their gradients (the step report's) */
} gc_bench_result;

/* Runs `warmup` unmeasured then `reps` measured steps over one new batch of `batch` rows:
 * the plain step (chunk_size 0: the whole batch in one graph) or the GradCache step in
 * chunks of chunk_size. Every step starts with no gradients, so each one allocates them
 * as a training step does. A memory error ends the runs and is returned in status (its
 * message left in gc_last_error()); everything the runs allocated is released either way. */
gc_bench_result gc_bench_measure(gc_bench_setup *setup, int64_t batch, int64_t chunk_size, int warmup, int reps);

#endif
