/* Memory of training a decoder-family embedder, plain and with Gradient Cache, from the
 * library's exact accounting (gc_memory_get_stats, every allocation counted, on the CPU):
 * a randomly initialised model of one of three shapes (--shape: Qwen2.5-0.5B's, the default:
 * hidden 896, 14 heads, 2 key/value heads, intermediate 4864, vocab 151936; Qwen3-Embedding-
 * 0.6B's; Mistral-7B's), `layers` of its layers, a tied encoder trained contrastively on pairs
 * of random token sequences of `length` tokens with AdamW: the whole model, or (--lora-r R)
 * LoRA adapters of rank R, alpha 2R, on all seven projections, the base frozen.
 *
 *   bench_decoder_memory [--shape S] [--layers all] [--length 256] [--batch 8] [--chunk 2]
 *                        [--dtype f32|bf16] [--lora-r 0]
 *   bench_decoder_memory --table [--shape S] [--length 256] [--chunk 4] [--dtype bf16] [--lora-r 0]
 *
 * The first prints, in bytes:
 *   - parameters, gradients, AdamW's state (moments, and f32 masters for bf16): measured live
 *     after a step, the state also as decoder_adamw_bytes counts it;
 *   - a forward's graph for one chunk (the activations backward keeps) and the transient peak
 *     of a plain step over one chunk (graph, backward's temporaries, the gradients' growth);
 *   - the transient peak and the time of a GradCache step of `batch` pairs in chunks of
 *     `chunk`, and of one of 2 x batch pairs: their difference per pair is what the cache of
 *     representations and the loss add per example.
 * --table extrapolates such measurements of 1 and 2 layers to the shape's whole depth
 * (decoder_memory_table.c) and prints the largest batch under 24 and 80 GiB. Not a test: run
 * by hand. */
#include <stdio.h>
#include <time.h>

#include "bench_util.h"
#include "decoder_memory.h"

/* The transient peak of one GradCache step of `pairs` pairs (over the live bytes before it);
 * seconds[0] its wall time, seconds[1] the process's CPU time (all threads: on a loaded
 * machine the wall time says more about the load than about the step). */
static size_t cached_step(gc_text_encoder *encoder, gc_param_list *params, gc_adamw *opt, int64_t pairs,
                          const options *o, uint64_t seed, double seconds[2]) {
    static gc_contrastive_options loss = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_cache_config config = {
        .n_models = 2,
        .models = {{encoder, decoder_forward, o->chunk, params}, {encoder, decoder_forward, o->chunk, params}},
        .loss = gc_contrastive_loss_fn(&loss)};
    gc_cache *cache = gc_cache_new(&config);
    gc_batch inputs[2] = {decoder_random_batch(pairs, o, seed), decoder_random_batch(pairs, o, seed + 1)};
    gc_param_list_zero_grad(params);
    size_t before = bench_live();
    gc_memory_reset_peak(gc_cpu());
    double start = gc_seconds(), value;
    clock_t cpu = clock();
    bench_require(gc_cache_step(cache, inputs, &value, NULL));
    size_t transient = bench_peak() - before;
    bench_require(gc_adamw_step(opt));
    seconds[0] = gc_seconds() - start;
    seconds[1] = (double)(clock() - cpu) / CLOCKS_PER_SEC;
    decoder_batch_free(&inputs[0]);
    decoder_batch_free(&inputs[1]);
    gc_cache_free(cache);
    return transient;
}

int main(int argc, char **argv) {
    options o = decoder_memory_parse(argc, argv);
    if (o.table) return decoder_memory_table(&o);
    gc_text_encoder encoder;
    gc_param_list params = {0};
    size_t start = bench_live();
    decoder_model_init(&encoder, &o, o.layers, &params);
    size_t parameters = bench_live() - start;
    gc_adamw opt;
    bench_require(gc_adamw_init(&opt, &params, 1e-5, 0.9, 0.999, 1e-8, 0.01));

    /* one chunk: its forward's graph, then the plain step's transient peak */
    gc_batch chunk = decoder_random_batch(o.chunk, &o, 1);
    size_t before = bench_live();
    gc_tensor *y = decoder_forward(&encoder, &chunk);
    if (!y) bench_require(gc_last_status());
    size_t graph = bench_live() - before;
    gc_tensor_release(y);
    decoder_batch_free(&chunk);
    double plain_seconds;
    size_t plain_transient = decoder_plain_transient(&encoder, &params, o.chunk, &o, &plain_seconds);

    double seconds[2][2];
    size_t cached = cached_step(&encoder, &params, &opt, o.batch, &o, 10, seconds[0]);
    size_t state = bench_live() - start - parameters; /* gradients and AdamW's state after a step */
    size_t gradients = 0;
    for (int i = 0; i < params.count; i++)
        if (gc_grad(params.items[i].tensor)) gradients += gc_nbytes(gc_grad(params.items[i].tensor));
    size_t cached_double = cached_step(&encoder, &params, &opt, 2 * o.batch, &o, 20, seconds[1]);

    printf("# bench_decoder_memory --shape %s --layers %d --length %lld --batch %lld --chunk %lld --dtype %s "
           "--lora-r %d\n", decoder_shape_name(o.shape), o.layers, (long long)o.length, (long long)o.batch,
           (long long)o.chunk, gc_dtype_name(o.dtype), o.lora_r);
    printf("parameters and adapters %zu bytes; learning: %lld\n", parameters, (long long)gc_param_list_numel(&params));
    printf("gradients %zu\n", gradients);
    printf("optimizer state %zu (counted: %zu)\n", state - gradients, decoder_adamw_bytes(&params));
    printf("graph of one chunk (%lld sequences) %zu\n", (long long)o.chunk, graph);
    printf("plain step of one chunk: transient peak %zu (%.1f s)\n", plain_transient, plain_seconds);
    for (int i = 0; i < 2; i++)
        printf("GradCache step of %lld pairs: transient peak %zu (%.1f s, %.1f s of CPU)\n", (long long)(o.batch << i),
               i ? cached_double : cached, seconds[i][0], seconds[i][1]);
    printf("peak of the step of %lld pairs, everything live counted: %zu\n", (long long)(2 * o.batch), gc_memory_get_stats(gc_cpu()).peak_bytes);
    gc_adamw_free(&opt);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
    gc_shutdown();
    return 0;
}
