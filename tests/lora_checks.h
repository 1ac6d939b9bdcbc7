/* Adapted text encoders for the LoRA tests (test_lora.c in one process, test_dist_lora.c over
 * a process group): a small encoder with PEFT-style adapters on named Linears, a dual batch
 * with padding and hard negatives, and the check that a cached step's adapter gradients equal
 * the plain full-batch step's. In f64 the bound is 1e-10: f64 rounding (1e-16 per op) summed
 * over a few thousand ops and divided by the losses' cancellations stays far below it, while
 * one wrong dropout mask or a gradient reaching a frozen weight moves it by more than 1e-3. */
#ifndef GC_TESTS_LORA_CHECKS_H
#define GC_TESTS_LORA_CHECKS_H

#include <string.h>

#include "check.h"

/* A small encoder of `dtype` with a projection (no Hugging Face layout: gradcache's names). */
static gc_text_encoder_config tiny_config(gc_dtype dtype) {
    return (gc_text_encoder_config){.vocab = 30, .max_length = 6, .dim = 8, .heads = 2, .layers = 2, .hidden = 16,
                                    .projection = 4, .dropout = 0.1, .activation = GC_ACT_GELU_ERF,
                                    .pooling = GC_POOL_MEAN, .dtype = dtype};
}

/* B drawn from U(-0.5, 0.5) in every adapter: with B = 0 (its start) A's gradient is 0 and
 * the comparison would prove nothing about A. */
static void randomise_b(const gc_param_list *trainable, uint64_t seed) {
    for (int i = 0; i < trainable->count; i++) {
        gc_tensor *b = trainable->items[i].tensor;
        if (!strstr(trainable->items[i].name, "lora_B")) continue;
        gc_tensor *values = gc_uniform(b->ndim, b->shape, b->dtype, b->device, -0.5, 0.5, seed, (uint64_t)i * 1000);
        REQUIRE(values);
        memcpy(gc_data(b), gc_data(values), (size_t)gc_numel(b) * gc_dtype_size(b->dtype));
        gc_tensor_mark_written(b);
        gc_tensor_release(values);
    }
}

static gc_text_encoder make_adapted(uint64_t seed, const char *targets, bool checkpoint_layers, gc_dtype dtype) {
    gc_text_encoder_config config = tiny_config(dtype);
    gc_text_encoder encoder;
    gc_generator init = {seed, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    encoder.checkpoint_layers = checkpoint_layers;
    gc_lora_config lora = {.r = 2, .alpha = 4, .dropout = 0.1, .targets = targets};
    int attached = 0;
    REQUIRE(gc_lora_attach_targets(&encoder, &lora, &init, &attached) == GC_OK);
    CHECK(attached > 0);
    return encoder;
}

/* --- Gradient Cache --- */

static gc_tensor *text_forward(void *state, const gc_batch *chunk) {
    return gc_text_encoder_forward(state, chunk->tensors[0], chunk->tensors[1], true);
}

typedef struct dual_batch {
    gc_tensor *q_uniform, *p_uniform, *q_ids, *p_ids, *q_mask, *p_mask;
    gc_batch inputs[2];
} dual_batch;

/* 5 queries and 10 passages (1 hard negative each) of 6 tokens, passage 2 with 3 padding
 * tokens: the cached step's first pass packs the real tokens, the second does not. A rank's
 * rows are its own (`rank` moves the ids' seeds); rank 0's are those of one process. */
static void make_batch(dual_batch *d, gc_dtype dtype, int rank) {
    d->q_uniform = gc_uniform(GC_SHAPE(5, 6), GC_F32, gc_cpu(), 0, 30, 180 + 10 * (uint64_t)rank, 0);
    d->p_uniform = gc_uniform(GC_SHAPE(10, 6), GC_F32, gc_cpu(), 0, 30, 181 + 10 * (uint64_t)rank, 0);
    d->q_ids = gc_cast(d->q_uniform, GC_I32), d->p_ids = gc_cast(d->p_uniform, GC_I32);
    gc_tensor *q_mask = gc_ones(GC_SHAPE(5, 6), GC_F64, gc_cpu()), *p_mask = gc_ones(GC_SHAPE(10, 6), GC_F64, gc_cpu());
    REQUIRE(q_mask && p_mask);
    double *mask_values = gc_data(p_mask);
    for (int t = 3; t < 6; t++) mask_values[2 * 6 + t] = 0;
    d->q_mask = gc_cast(q_mask, dtype), d->p_mask = gc_cast(p_mask, dtype);
    REQUIRE(d->q_ids && d->p_ids && d->q_mask && d->p_mask);
    RELEASE(q_mask, p_mask);
    d->inputs[0] = (gc_batch){2, {"ids", "mask"}, {d->q_ids, d->q_mask}};
    d->inputs[1] = (gc_batch){2, {"ids", "mask"}, {d->p_ids, d->p_mask}};
}

static void free_batch(dual_batch *d) { RELEASE(d->q_uniform, d->p_uniform, d->q_ids, d->p_ids, d->q_mask, d->p_mask); }

/* The largest relative difference allowed between a cached step's adapter gradients and the
 * full batch's. f64: 1e-10 (see the top). A 16-bit base: `verify --dtype`'s (chunks + 1) u
 * (cli/command_verify.c), u = 2^-8 (bf16) or 2^-11 (f16), 3 chunks of queries (5 rows in 2s)
 * and 4 of passages (10 rows in 3s): both steps run the same 16-bit ops on the same values but
 * for the cached step's representation gradient, rounded from the loss's f32 to 16 bits once,
 * and the gradients summed chunk by chunk (in the adapters' f32 here, so at most one rounding
 * per chunk of the 16-bit activation gradients that feed them). Measured: about 1e-7, f32's
 * rounding: the two steps round the same 16-bit values alike, and sum in f32. */
static double cached_tolerance(gc_dtype dtype) {
    const int chunks = 4;
    switch (dtype) {
    case GC_BF16: return (chunks + 1) * 0x1p-8;
    case GC_F16: return (chunks + 1) * 0x1p-11;
    default: return 1e-10;
    }
}

/* A cached step against the plain full-batch step (gc_cache_verify) over adapted encoders. With
 * a process group, each rank gives its own rows of the global batch, the loss is over the
 * gathered representations and a bucketer reduces the adapters' gradients in both steps;
 * every rank draws its own dropout masks, the same in both steps. */
static void check_cached_step(const char *name, bool tied, bool checkpoint_layers, gc_dtype dtype,
                              gc_process_group *group) {
    gc_text_encoder queries =
        make_adapted(5, "attention.query,attention.value,mlp.out,projection", checkpoint_layers, dtype);
    gc_text_encoder passages = make_adapted(6, "attention.key,mlp.in", checkpoint_layers, dtype);
    gc_text_encoder *second = tied ? &queries : &passages;
    gc_param_list all[2] = {{0}, {0}}, trainable[2] = {{0}, {0}};
    gc_text_encoder_params(&queries, "", &all[0]);
    gc_text_encoder_params(second, "", &all[1]);
    for (int i = 0; i < 2; i++) {
        gc_param_list_trainable(&all[i], &trainable[i]);
        randomise_b(&trainable[i], 40 + (uint64_t)i);
    }
    int rank = group ? gc_dist_rank(group) : 0;
    dual_batch batch;
    make_batch(&batch, dtype, rank);
    gc_param_list reduced = {0}; /* the adapters of both encoders, once each */
    for (int i = 0; i < (tied ? 1 : 2); i++)
        for (int j = 0; j < trainable[i].count; j++)
            gc_param_list_add(&reduced, i ? "passage" : "query", trainable[i].items[j].name,
                              trainable[i].items[j].tensor, false);
    gc_ddp *ddp = group ? gc_ddp_new(group, &reduced, NULL) : NULL;
    REQUIRE(!group || ddp);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_cache_config cache_config = {
        .n_models = 2,
        .models = {{&queries, text_forward, 2, &trainable[0]}, {second, text_forward, 3, &trainable[1]}},
        .loss = gc_contrastive_loss_fn(&options),
        .group = group,
        .ddp = ddp};
    gc_cache *cache = gc_cache_new(&cache_config);
    gc_manual_seed(9 + (uint64_t)rank);
    double worst = 1;
    CHECK_MSG(gc_cache_verify(cache, batch.inputs, 1e-12, &worst, NULL, 0) == GC_OK, "%s: %s", name, gc_last_error());
    CHECK_MSG(worst <= cached_tolerance(dtype), "%s: largest relative adapter gradient difference %.3g (allowed %.3g)",
              name, worst, cached_tolerance(dtype));
    if (gc_dtype_size(dtype) == 2) printf("%s: largest relative adapter gradient difference %.3g\n", name, worst);
    /* a frozen weight gets no gradient; every adapter gets a nonzero one */
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < all[m].count; i++) {
            gc_tensor *grad = gc_grad(all[m].items[i].tensor);
            bool adapter = gc_requires_grad(all[m].items[i].tensor);
            CHECK_MSG(adapter ? grad != NULL : grad == NULL, "%s: %s %s a gradient", name, all[m].items[i].name,
                      adapter ? "lacks" : "has");
        }
    gc_cache_free(cache);
    if (ddp) gc_ddp_free(ddp);
    gc_param_list_free(&reduced);
    free_batch(&batch);
    for (int i = 0; i < 2; i++) gc_param_list_free(&all[i]), gc_param_list_free(&trainable[i]);
    gc_text_encoder_free(&queries);
    gc_text_encoder_free(&passages);
}

#endif
