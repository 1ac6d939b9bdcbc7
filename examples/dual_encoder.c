/* Trains a dual text encoder with Gradient Cache: batches of 64 query/passage pairs are
 * processed in chunks of 8, so only 8 sequences' activations are ever alive at once, yet
 * every query sees all 64 passages as negatives.
 * The task is synthetic: a passage is its query's tokens spelled with another alphabet
 * (token t becomes (7 t + 3) mod vocab), so the two towers must learn to agree.
 * Build: cc dual_encoder.c $(pkg-config --cflags --libs gradcache). Exit status 0 when the
 * loss fell by half. */
#include <stdio.h>
#include <string.h>

#include <gradcache/gradcache.h>

enum { VOCAB = 64, LENGTH = 8, BATCH = 64, CHUNK = 8, STEPS = 40 };

/* The model function GradCache calls: one chunk of {ids, mask} -> [rows, dim]. */
static gc_tensor *encode(void *model, const gc_batch *chunk) {
    return gc_text_encoder_forward(model, chunk->tensors[0], chunk->tensors[1], true);
}

/* Random queries, their passages, and an all-ones mask (no padding). */
static void make_batch(uint64_t step, gc_tensor **queries, gc_tensor **passages, gc_tensor **mask) {
    gc_tensor *uniform = gc_uniform(GC_SHAPE(BATCH, LENGTH), GC_F32, gc_cpu(), 0, VOCAB, 1000 + step, 0);
    gc_tensor *ids = gc_cast(uniform, GC_I32); /* truncation: uniform ids in [0, VOCAB) */
    gc_tensor *spelled = gc_mul_scalar(ids, 7);
    gc_tensor *shifted = gc_add_scalar(spelled, 3);
    int32_t *values = gc_data(shifted);
    for (int64_t i = 0; i < gc_numel(shifted); i++) values[i] %= VOCAB;
    *queries = ids;
    *passages = shifted;
    *mask = gc_ones(GC_SHAPE(BATCH, LENGTH), GC_F32, gc_cpu());
    gc_tensor_release(uniform);
    gc_tensor_release(spelled);
}

int main(int argc, char **argv) {
    if (argc > 1) { /* no flags: everything is in the constants above */
        printf("usage: %s\nTrains a dual text encoder with Gradient Cache on a synthetic task and prints the loss.\n",
               argv[0]);
        return strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    gc_text_encoder_config config = {.vocab = VOCAB, .max_length = LENGTH, .dim = 32, .heads = 4, .layers = 1,
                                     .hidden = 64, .projection = 32, .dropout = 0.1, .activation = GC_ACT_GELU_ERF,
                                     .pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_generator init = {42, 0};
    gc_text_encoder towers[2];
    gc_param_list params = {0};
    for (int t = 0; t < 2; t++) {
        if (gc_text_encoder_init(&towers[t], &config, gc_cpu(), &init) != GC_OK) {
            fprintf(stderr, "init: %s\n", gc_last_error());
            return 1;
        }
        gc_text_encoder_params(&towers[t], t ? "passage" : "query", &params);
    }
    gc_adamw optimizer;
    gc_adamw_init(&optimizer, &params, 3e-3, 0.9, 0.999, 1e-8, 0.01);

    gc_contrastive_options loss_options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_cache_config cache_config = {
        .n_models = 2,
        .models = {{&towers[0], encode, CHUNK, NULL}, {&towers[1], encode, CHUNK, NULL}},
        .loss = gc_contrastive_loss_fn(&loss_options),
    };
    gc_cache *cache = gc_cache_new(&cache_config);

    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        gc_tensor *queries, *passages, *mask;
        make_batch((uint64_t)step, &queries, &passages, &mask);
        gc_batch inputs[2] = {{2, {"ids", "mask"}, {queries, mask}}, {2, {"ids", "mask"}, {passages, mask}}};
        gc_cache_report report;
        double loss;
        if (gc_cache_step(cache, inputs, &loss, &report) != GC_OK) {
            fprintf(stderr, "step %d: %s\n", step, gc_last_error());
            return 1;
        }
        gc_adamw_step(&optimizer);
        gc_param_list_zero_grad(&params);
        if (step == 0) first = loss;
        last = loss;
        if (step % 5 == 0 || step == STEPS - 1)
            printf("step %2d  loss %.4f  peak %zu bytes  (forward %.0f ms, loss %.0f ms, backward %.0f ms)\n", step,
                   loss, report.backward_peak_bytes, 1e3 * report.forward_seconds, 1e3 * report.loss_seconds,
                   1e3 * report.backward_seconds);
        gc_tensor_release(queries);
        gc_tensor_release(passages);
        gc_tensor_release(mask);
    }
    printf("loss %.4f -> %.4f\n", first, last);
    gc_cache_free(cache);
    gc_adamw_free(&optimizer);
    gc_param_list_free(&params);
    for (int t = 0; t < 2; t++) gc_text_encoder_free(&towers[t]);
    gc_shutdown(); /* the CPU kernels' threads joined: nothing of the library outlives main */
    return last < first / 2 ? 0 : 1;
}
