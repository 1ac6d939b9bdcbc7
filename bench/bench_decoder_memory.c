/* Memory of training a decoder-family embedder, plain and with Gradient Cache, from the
 * library's exact accounting (gc_memory_get_stats, every allocation counted, on the CPU):
 * a randomly initialised model of Qwen2.5-0.5B's shapes (hidden 896, 14 heads, 2 key/value
 * heads, intermediate 4864, vocab 151936, tied embeddings, q/k/v biases, rope 1e6), `layers`
 * of its 24 layers, a tied encoder trained contrastively on pairs of random token sequences of
 * `length` tokens with AdamW.
 *
 *   bench_decoder_memory [--layers 24] [--length 256] [--batch 8] [--chunk 2] [--dtype f32|bf16]
 *
 * It prints, in bytes:
 *   - parameters, gradients, AdamW's state (moments, and f32 masters for bf16): measured live
 *     after a step;
 *   - a forward's graph for one chunk (the activations backward keeps) and the transient peak
 *     of a plain step over one chunk (graph, backward's temporaries, the gradients' growth);
 *   - the transient peak of a GradCache step of `batch` pairs in chunks of `chunk`, and of one
 *     of 2 x batch pairs: their difference per pair is what the cache of representations and
 *     the loss add per example.
 * From these, RESULTS.md extrapolates per layer and per example (see there). Not a test: run
 * by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

typedef struct options {
    int layers;
    int64_t length, batch, chunk;
    gc_dtype dtype;
} options;

static void usage(void) {
    fprintf(stderr, "usage: bench_decoder_memory [--layers N] [--length T] [--batch B] [--chunk C] [--dtype f32|bf16]\n");
    exit(2);
}

static options parse(int argc, char **argv) {
    options o = {24, 256, 8, 2, GC_F32};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--layers")) o.layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--length")) o.length = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) o.batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk")) o.chunk = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--dtype")) o.dtype = !strcmp(argv[i + 1], "bf16") ? GC_BF16 : GC_F32;
        else usage();
    }
    if (argc % 2 == 0 || o.layers < 1 || o.length < 1 || o.chunk < 1 || o.batch < o.chunk) usage();
    return o;
}

/* Qwen2.5-0.5B's configuration, with `layers` layers. */
static gc_text_encoder_config qwen25(const options *o) {
    return (gc_text_encoder_config){
        .vocab = 151936, .max_length = 32768, .dim = 896, .heads = 14, .layers = o->layers, .hidden = 4864,
        .pre_norm = true, .pooling = GC_POOL_LAST, .normalize = true, .layernorm_eps = 1e-6, .dtype = o->dtype,
        .rms_norm = true, .gated_mlp = true, .no_mlp_bias = true,
        .attention = {.kv_heads = 2, .causal = true, .rope_theta = 1e6, .no_output_bias = true}};
}

static size_t live(void) { return gc_memory_get_stats(gc_cpu()).live_bytes; }
static size_t peak(void) { return gc_memory_get_stats(gc_cpu()).peak_bytes; }

static void require(gc_status status) {
    if (status != GC_OK) {
        fprintf(stderr, "bench_decoder_memory: %s\n", gc_last_error());
        exit(1);
    }
}

/* ids i32 [rows, length] drawn uniformly from the vocabulary, and a mask of ones. */
static gc_batch random_batch(int64_t rows, const options *o, uint64_t seed) {
    gc_tensor *uniform = gc_uniform(GC_SHAPE(rows, o->length), GC_F32, gc_cpu(), 0, 151935, seed, 0);
    gc_batch batch = {2, {"ids", "mask"}, {gc_cast(uniform, GC_I32), gc_ones(GC_SHAPE(rows, o->length), o->dtype, gc_cpu())}};
    gc_tensor_release(uniform);
    if (!batch.tensors[0] || !batch.tensors[1]) require(gc_last_status());
    return batch;
}

static void free_batch(gc_batch *batch) {
    gc_tensor_release(batch->tensors[0]);
    gc_tensor_release(batch->tensors[1]);
}

static gc_tensor *forward(void *encoder, const gc_batch *chunk) {
    return gc_text_encoder_forward(encoder, chunk->tensors[0], chunk->tensors[1], true);
}

/* The transient peak of one GradCache step of `pairs` pairs (over the live bytes before it). */
static size_t cached_step(gc_text_encoder *encoder, gc_param_list *params, gc_adamw *opt, int64_t pairs,
                          const options *o, uint64_t seed, double *seconds) {
    static gc_contrastive_options loss = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_cache_config config = {.n_models = 2,
                              .models = {{encoder, forward, o->chunk, params}, {encoder, forward, o->chunk, params}},
                              .loss = gc_contrastive_loss_fn(&loss)};
    gc_cache *cache = gc_cache_new(&config);
    gc_batch inputs[2] = {random_batch(pairs, o, seed), random_batch(pairs, o, seed + 1)};
    gc_param_list_zero_grad(params);
    size_t before = live();
    gc_memory_reset_peak(gc_cpu());
    double start = gc_seconds(), value;
    require(gc_cache_step(cache, inputs, &value, NULL));
    size_t transient = peak() - before;
    require(gc_adamw_step(opt));
    *seconds = gc_seconds() - start;
    free_batch(&inputs[0]);
    free_batch(&inputs[1]);
    gc_cache_free(cache);
    return transient;
}

int main(int argc, char **argv) {
    options o = parse(argc, argv);
    gc_text_encoder_config config = qwen25(&o);
    gc_text_encoder encoder;
    gc_generator init = {29, 0};
    size_t start = live();
    require(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init));
    size_t parameters = live() - start;
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    gc_adamw opt;
    require(gc_adamw_init(&opt, &params, 1e-5, 0.9, 0.999, 1e-8, 0.01));

    /* one chunk: its forward's graph, then the plain step's transient peak (backward seeded with ones) */
    gc_batch chunk = random_batch(o.chunk, &o, 1);
    size_t before = live();
    gc_memory_reset_peak(gc_cpu());
    double t0 = gc_seconds();
    gc_tensor *y = forward(&encoder, &chunk);
    if (!y) require(gc_last_status());
    size_t graph = live() - before;
    gc_tensor *seed = gc_ones(y->ndim, y->shape, y->dtype, gc_cpu());
    require(gc_backward(&y, &seed, 1));
    size_t plain_transient = peak() - before;
    double plain_seconds = gc_seconds() - t0;
    gc_tensor_release(y);
    gc_tensor_release(seed);
    free_batch(&chunk);

    double seconds[2];
    size_t cached = cached_step(&encoder, &params, &opt, o.batch, &o, 10, &seconds[0]);
    size_t state = live() - start - parameters; /* gradients and AdamW's state after a step */
    size_t gradients = 0;
    for (int i = 0; i < params.count; i++)
        if (gc_grad(params.items[i].tensor)) gradients += gc_nbytes(gc_grad(params.items[i].tensor));
    size_t cached_double = cached_step(&encoder, &params, &opt, 2 * o.batch, &o, 20, &seconds[1]);

    printf("# bench_decoder_memory --layers %d --length %lld --batch %lld --chunk %lld --dtype %s\n", o.layers,
           (long long)o.length, (long long)o.batch, (long long)o.chunk, gc_dtype_name(o.dtype));
    printf("parameters %lld (%zu bytes)\n", (long long)gc_param_list_numel(&params), parameters);
    printf("gradients %zu\n", gradients);
    printf("optimizer state %zu\n", state - gradients);
    printf("graph of one chunk (%lld sequences) %zu\n", (long long)o.chunk, graph);
    printf("plain step of one chunk: transient peak %zu (%.1f s)\n", plain_transient, plain_seconds);
    printf("GradCache step of %lld pairs: transient peak %zu (%.1f s)\n", (long long)o.batch, cached, seconds[0]);
    printf("GradCache step of %lld pairs: transient peak %zu (%.1f s)\n", (long long)(2 * o.batch), cached_double,
           seconds[1]);
    gc_adamw_free(&opt);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
    gc_shutdown();
    return 0;
}
