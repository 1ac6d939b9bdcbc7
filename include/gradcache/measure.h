/* Measuring a training step of a dual encoder (gradcache/train.h) on synthetic texts: its time
 * and peak memory, plain or with Gradient Cache at a chunk size, to choose a chunk size or see
 * what a batch costs. What the gradcache program's verify and bench commands run (their charts:
 * gradcache/plot.h). */
#ifndef GRADCACHE_MEASURE_H
#define GRADCACHE_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

#include "gradcache/cache.h"
#include "gradcache/rng.h"
#include "gradcache/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows random texts -> ids i32 [rows, max_length] and mask [rows, max_length] (mask_dtype) on
 * `device`, as gc_tokenize makes them with `tokenizer`: with the byte-level one, [CLS], then 0
 * to max_length - 1 random bytes (ids in [GC_TOKEN_FIRST_BYTE + 1, GC_TOKEN_VOCAB)), then
 * padding, so that padding and the mask are exercised as in training; with another (a
 * pretrained model's), the same draws as random lowercase words. The random numbers come
 * from `generator` (advanced past them): a (seed, offset) names a batch. GC_OK, or the
 * allocation error with nothing left allocated. */
gc_status gc_synthetic_tokens(const gc_tokenizer *tokenizer, int64_t rows, int64_t max_length, gc_dtype mask_dtype,
                              gc_device device, gc_generator *generator, gc_tensor **ids, gc_tensor **mask);

#define GC_BENCH_MAX_REPS 100

/* A model on a device with its loss and a source of synthetic batches. */
typedef struct gc_bench_setup {
    gc_dual_encoder model;
    gc_device device;
    gc_dtype dtype;
    int64_t max_length;
    gc_contrastive_options loss; /* in-batch InfoNCE, cosine at temperature 0.05; the method is the caller's */
    gc_generator data;           /* where synthetic batches are drawn from */
    bool keep_last_graph;        /* GradCache keeps each model's last chunk's graph (cache.h) */
} gc_bench_setup;

/* Seeds every device's default generator (dropout) with `seed` and builds the dual (or tied)
 * encoder of `config` (its dtype and length) from `seed`; the data come from seed + 1. GC_OK,
 * or the allocation error (a memory limit too small for the model itself). */
gc_status gc_bench_setup_init(gc_bench_setup *setup, const gc_text_encoder_config *config, bool tied, uint64_t seed,
                              gc_device device);
/* The same with a pretrained model folder (gc_dual_encoder_from_folder: one tied encoder,
 * max_length tokens, its parameters in `dtype`) instead of a configuration: the synthetic
 * texts' ids are within every vocabulary's first 300. */
gc_status gc_bench_setup_from_folder(gc_bench_setup *setup, const char *dir, int64_t max_length, gc_dtype dtype,
                                     uint64_t seed, gc_device device);
void gc_bench_setup_free(gc_bench_setup *setup);

/* `rows` synthetic query/passage pairs: inputs[0] the queries and inputs[1] the passages, each
 * {ids i32 [rows, max_length], mask [rows, max_length]}. */
typedef struct gc_bench_batch {
    gc_tensor *tensors[4]; /* query ids, query mask, passage ids, passage mask */
    gc_batch inputs[2];
} gc_bench_batch;

gc_status gc_bench_batch_make(gc_bench_setup *setup, int64_t rows, gc_bench_batch *batch);
void gc_bench_batch_free(gc_bench_batch *batch);

/* GradCache over the two towers (the same one twice when tied), each in chunks of chunk_size
 * rows. Every model lists all the parameters (gc_cache_verify counts each tensor once). */
gc_cache_config gc_bench_cache_config(gc_bench_setup *setup, int64_t chunk_size);

typedef struct gc_bench_result {
    gc_status status;   /* GC_OK, or the memory error that stopped a step */
    size_t peak_bytes;  /* the device's highest live bytes during a step, parameters included */
    double step_ms;     /* median over the measured steps */
    double forward_ms;  /* GradCache: median time of the first, graph-less forward pass */
    size_t cache_bytes; /* GradCache: the representations and their gradients (the step report's) */
    size_t packed_bytes; /* the weights' packed panels at their highest during a step (outside
                            peak_bytes: gc_memory_stats; 0 with gc_set_weight_packing(false)) */
    size_t workspace_bytes; /* the library's own device memory (CUDA: the cuBLAS workspace and
                               scratch, gc_memory_stats), outside peak_bytes; PyTorch's
                               max_memory_allocated counts its cuBLAS workspace, so a figure to
                               set beside it is peak_bytes + workspace_bytes. CPU: 0 */
} gc_bench_result;

/* Runs `warmup` unmeasured then `reps` (1 to GC_BENCH_MAX_REPS) measured steps over one new
 * batch of `batch` rows: the plain step (chunk_size 0: the whole batch in one graph) or the
 * GradCache step in chunks of chunk_size. Every step starts with no gradients, so each one
 * allocates them as a training step does. A memory error ends the runs and is returned in
 * status (its message left in gc_last_error()); everything the runs allocated is released
 * either way. */
gc_bench_result gc_bench_measure(gc_bench_setup *setup, int64_t batch, int64_t chunk_size, int warmup, int reps);

/* Sorts values[0..n) (n >= 1) and returns the median (the upper one for an even n). */
double gc_median(double *values, int n);

#ifdef __cplusplus
}
#endif
#endif
