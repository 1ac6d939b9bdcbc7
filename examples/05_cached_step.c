/* Step 5: Gradient Cache is exact. Two text encoders (queries and passages) and the in-batch
 * contrastive loss over a batch of 64 pairs: the cached step runs each tower in chunks of 8
 * without a graph, takes the loss and d loss / d representation on the cached
 * representations, then runs each chunk again with a graph (its dropout mask replayed) and
 * back-propagates its slice of that gradient. gc_cache_verify takes that step and the plain
 * one (one graph over the whole batch) from the same random state and compares every
 * parameter's gradient. The step reports its peak memory beside the plain step's.
 * Build: cc 05_cached_step.c $(pkg-config --cflags --libs gradcache). Exit status 0 when the
 * largest relative difference is below 1e-5 (f32 rounding) and the cached step's peak is
 * the smaller. */
#include <stdio.h>

#include <gradcache/gradcache.h>

enum { VOCAB = 64, LENGTH = 16, BATCH = 64, CHUNK = 8 };

static gc_tensor *encode(void *tower, const gc_batch *chunk) {
    return gc_text_encoder_forward(tower, chunk->tensors[0], chunk->tensors[1], true);
}

int main(void) {
    gc_text_encoder_config config = {.vocab = VOCAB, .max_length = LENGTH, .dim = 32, .heads = 4, .layers = 2,
                                     .hidden = 64, .dropout = 0.1, .activation = GC_ACT_GELU_ERF,
                                     .pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_generator init = {5, 0};
    gc_text_encoder towers[2];
    gc_param_list params[2] = {{0}, {0}};
    for (int t = 0; t < 2; t++) {
        if (gc_text_encoder_init(&towers[t], &config, gc_cpu(), &init) != GC_OK) return 1;
        gc_text_encoder_params(&towers[t], t ? "passage" : "query", &params[t]);
    }
    gc_tensor *uniform = gc_uniform(GC_SHAPE(2 * BATCH, LENGTH), GC_F32, gc_cpu(), 0, VOCAB, 9, 0);
    gc_tensor *ids = gc_cast(uniform, GC_I32), *mask = gc_ones(GC_SHAPE(BATCH, LENGTH), GC_F32, gc_cpu());
    gc_tensor *queries = gc_slice0(ids, 0, BATCH), *passages = gc_slice0(ids, BATCH, 2 * BATCH);
    gc_batch inputs[2] = {{2, {"ids", "mask"}, {queries, mask}}, {2, {"ids", "mask"}, {passages, mask}}};

    gc_contrastive_options loss_options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_cache_config cache_config = {
        .n_models = 2,
        .models = {{&towers[0], encode, CHUNK, &params[0]}, {&towers[1], encode, CHUNK, &params[1]}},
        .loss = gc_contrastive_loss_fn(&loss_options),
    };
    gc_cache *cache = gc_cache_new(&cache_config);
    double largest;
    if (gc_cache_verify(cache, inputs, 1e-12, &largest, NULL, 0) != GC_OK) return 1;
    printf("largest relative difference between the cached and the full-batch gradients: %.2e\n", largest);

    /* the memory each step needs, parameters and gradients included */
    size_t peak[2];
    for (int plain = 0; plain < 2; plain++) {
        double loss;
        for (int t = 0; t < 2; t++) gc_param_list_zero_grad(&params[t]);
        gc_memory_reset_peak(gc_cpu());
        gc_status status = plain ? gc_cache_full_batch_step(cache, inputs, &loss)
                                 : gc_cache_step(cache, inputs, &loss, NULL);
        if (status != GC_OK) return 1;
        peak[plain] = gc_memory_get_stats(gc_cpu()).peak_bytes;
    }
    printf("peak memory: %zu bytes for the cached step, %zu for the plain step\n", peak[0], peak[1]);
    bool right = largest < 1e-5 && peak[0] < peak[1];
    printf("example 05_cached_step: %s\n", right ? "ok" : "WRONG");
    gc_cache_free(cache);
    gc_tensor *all[] = {uniform, ids, mask, queries, passages};
    for (int i = 0; i < 5; i++) gc_tensor_release(all[i]);
    for (int t = 0; t < 2; t++) {
        gc_param_list_free(&params[t]);
        gc_text_encoder_free(&towers[t]);
    }
    gc_shutdown();
    return right ? 0 : 1;
}
