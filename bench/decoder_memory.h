/* What bench_decoder_memory's two modes share (decoder_memory.c): the model shapes, the
 * options, random batches and the exact byte counts of gc_memory_get_stats on the CPU. */
#ifndef GC_BENCH_DECODER_MEMORY_H
#define GC_BENCH_DECODER_MEMORY_H

#include "gradcache/gradcache.h"

typedef enum decoder_shape { SHAPE_QWEN25_05B, SHAPE_QWEN3_06B, SHAPE_MISTRAL_7B, SHAPE_COUNT } decoder_shape;

typedef struct options {
    decoder_shape shape;
    int layers;     /* of the model built (the measured mode); the table builds 1 and 2 */
    int64_t length; /* tokens per sequence */
    int64_t batch;  /* pairs of a cached step (the measured mode) */
    int64_t chunk;  /* sequences per chunk */
    gc_dtype dtype;
    int lora_r;     /* 0: full fine-tuning; else adapters of this rank on all seven projections */
    bool table;
} options;

options decoder_memory_parse(int argc, char **argv);
const char *decoder_shape_name(decoder_shape shape);
/* The published model's sizes, with `layers` layers (0: all of them). */
gc_text_encoder_config decoder_shape_config(const options *o, int layers);

size_t bench_live(void);
size_t bench_peak(void);
void bench_require(gc_status status); /* exits naming the error unless GC_OK */

/* An encoder of o's shape, `layers` layers, and (o->lora_r) its adapters; *trainable gets what
 * learns: every parameter, or the adapters alone. */
void decoder_model_init(gc_text_encoder *encoder, const options *o, int layers, gc_param_list *trainable);
/* ids i32 [rows, length] drawn uniformly from the vocabulary, and a mask of ones. */
gc_batch decoder_random_batch(int64_t rows, const options *o, uint64_t seed);
void decoder_batch_free(gc_batch *batch);
gc_tensor *decoder_forward(void *encoder, const gc_batch *chunk);
/* The transient peak (over the live bytes before it) of a plain forward and backward of
 * `rows` sequences, the backward seeded with ones; the trainable parameters' gradients, none
 * before, are part of it and freed after. */
size_t decoder_plain_transient(gc_text_encoder *encoder, const gc_param_list *trainable, int64_t rows,
                               const options *o, double *seconds);
/* What AdamW keeps for `trainable`: two f32 moments each, and an f32 master of a 16-bit one. */
size_t decoder_adamw_bytes(const gc_param_list *trainable);

int decoder_memory_table(const options *o); /* decoder_memory_table.c */

#endif
