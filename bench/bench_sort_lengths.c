/* What length-sorted chunks (gc_cache_config.sort_by) and a token budget (gc_split_by_tokens)
 * save in a GradCache step of the trainer's `small` preset on a real pair file: the token
 * positions each forward pass computes (padding included) against the real ones, and the step
 * time, for chunks of rows only, by token budget, sorted, and sorted by budget. The batches are
 * the trainer's (gc_batch_sampler, gc_training_batch_make with the byte tokenizer: each side
 * padded to its batch's longest text); the four settings take each batch in turn (each first in
 * turn), from the same dropout state, so their times are side by side. keep_last_graph is off, so that both passes
 * compute the same chunks (the trainer keeps the last chunk's graph: one chunk fewer per side).
 * Not a test: run by hand.
 *
 *   bench_sort_lengths --data FILE [--batch 256] [--chunk 32] [--tokens 1024] [--length 64] [--steps 3] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

typedef struct options {
    const char *data;
    int64_t batch, chunk, tokens, length;
    int steps;
} options;

static options parse(int argc, char **argv) {
    options o = {NULL, 256, 32, 1024, 64, 3};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data")) o.data = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) o.batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk")) o.chunk = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) o.tokens = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--length")) o.length = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) o.steps = atoi(argv[i + 1]);
        else break;
    }
    if (argc % 2 == 0 || !o.data || o.batch < 1 || o.chunk < 1 || o.tokens < 1 || o.length < 2 || o.steps < 1 ||
        o.steps > GC_BENCH_MAX_REPS) {
        fprintf(stderr, "usage: bench_sort_lengths --data FILE [--batch B] [--chunk C] [--tokens N] [--length T] "
                        "[--steps 1..%d]\n", GC_BENCH_MAX_REPS);
        exit(2);
    }
    return o;
}

static void stop(const char *what) {
    fprintf(stderr, "bench_sort_lengths: %s: %s\n", what, gc_last_error());
    exit(1);
}

/* A tower whose forward counts the token positions it is given ([rows, T] of each chunk). */
typedef struct counted_tower {
    void *tower;
    int64_t positions;
} counted_tower;

static gc_tensor *counted_forward(void *state, const gc_batch *chunk) {
    counted_tower *counted = state;
    counted->positions += chunk->tensors[0]->shape[0] * chunk->tensors[0]->shape[1];
    return gc_dual_encoder_forward_train(counted->tower, chunk);
}

/* The real tokens of a mask [rows, T]. */
static int64_t real_tokens(const gc_tensor *mask) {
    gc_tensor *sum = gc_sum_all(mask);
    if (!sum) stop("summing a mask");
    int64_t tokens = (int64_t)gc_item(sum);
    gc_tensor_release(sum);
    return tokens;
}

#define SETTINGS 4

typedef struct setting {
    const char *name;
    bool budget, sorted;
    gc_cache *cache;
    counted_tower towers[2];
    double seconds[GC_BENCH_MAX_REPS];
    size_t peak;
} setting;

int main(int argc, char **argv) {
    options o = parse(argc, argv);
    gc_bench_setup setup;
    gc_text_encoder_config small = gc_model_preset(1, o.length); /* the trainer's `small` */
    if (gc_bench_setup_init(&setup, &small, false, 0, gc_cpu()) != GC_OK) stop("the model");
    gc_pairs pairs;
    if (gc_pairs_read(o.data, &pairs) != GC_OK) stop(o.data);
    if (pairs.count < o.batch) {
        fprintf(stderr, "bench_sort_lengths: %s has %lld pairs, fewer than a batch\n", o.data, (long long)pairs.count);
        return 1;
    }
    gc_batch_sampler sampler;
    gc_batch_sampler_init(&sampler, 0, pairs.count, o.batch);
    setting settings[SETTINGS] = {{.name = "rows only"}, {.name = "--gc-chunk-tokens", .budget = true},
                                  {.name = "--gc-sort-lengths", .sorted = true},
                                  {.name = "both", .budget = true, .sorted = true}};
    gc_token_budget budget = {o.tokens, "mask"}, cut_only = {INT64_MAX, "mask"}; /* as train/trainer.c sets them */
    for (int s = 0; s < SETTINGS; s++) {
        setting *x = &settings[s];
        gc_cache_config config = gc_bench_cache_config(&setup, o.chunk);
        for (int side = 0; side < 2; side++) {
            x->towers[side].tower = config.models[side].state;
            config.models[side].state = &x->towers[side];
            config.models[side].forward = counted_forward;
        }
        if (x->budget || x->sorted) config.split = gc_split_by_tokens, config.user = x->budget ? &budget : &cut_only;
        config.sort_by = x->sorted ? "mask" : NULL;
        x->cache = gc_cache_new(&config);
    }
    int64_t real[2] = {0};
    for (int step = 0; step < o.steps; step++) {
        int64_t epoch;
        const int64_t *examples = gc_batch_sampler_batch(&sampler, step, &epoch);
        gc_training_batch batch;
        if (gc_training_batch_make(&pairs, examples, o.batch, 0, setup.model.tokenizer, NULL, o.length, setup.dtype,
                                   setup.device, &batch) != GC_OK)
            stop("a batch");
        gc_batch inputs[2] = {{2, {"ids", "mask"}, {batch.query_ids, batch.query_mask}},
                              {2, {"ids", "mask"}, {batch.passage_ids, batch.passage_mask}}};
        real[0] += real_tokens(batch.query_mask), real[1] += real_tokens(batch.passage_mask);
        for (int turn = 0; turn < SETTINGS; turn++) {
            int s = (turn + step) % SETTINGS; /* each setting first in turn: none alone pays for cold caches */
            gc_param_list_zero_grad(&setup.model.params);
            gc_manual_seed(7);
            gc_cache_report report = {0};
            double start = gc_seconds(), loss = 0;
            if (gc_cache_step(settings[s].cache, inputs, &loss, &report) != GC_OK) stop(settings[s].name);
            settings[s].seconds[step] = gc_seconds() - start;
            size_t peaks[3] = {report.forward_peak_bytes, report.loss_peak_bytes, report.backward_peak_bytes};
            for (int p = 0; p < 3; p++) settings[s].peak = peaks[p] > settings[s].peak ? peaks[p] : settings[s].peak;
        }
        gc_training_batch_release(&batch);
    }
    printf("%s: %d batches of %lld pairs, --max-length %lld, chunks of %lld rows, budget %lld tokens, the small "
           "preset, f32; real tokens: queries %lld, passages %lld\n\n",
           o.data, o.steps, (long long)o.batch, (long long)o.length, (long long)o.chunk, (long long)o.tokens,
           (long long)real[0], (long long)real[1]);
    printf("| chunks | query positions computed | passage positions computed | real / computed | step ms (median) "
           "| vs rows only | peak MiB |\n|---|---|---|---|---|---|---|\n");
    double rows_only = gc_median(settings[0].seconds, o.steps);
    for (int s = 0; s < SETTINGS; s++) {
        setting *x = &settings[s];
        int64_t computed[2] = {x->towers[0].positions / 2, x->towers[1].positions / 2}; /* two passes */
        double median = gc_median(x->seconds, o.steps);
        printf("| %s | %lld | %lld | %.3f, %.3f | %.0f | %.2f | %.1f |\n", x->name, (long long)computed[0],
               (long long)computed[1], (double)real[0] / (double)computed[0], (double)real[1] / (double)computed[1],
               1e3 * median, median / rows_only, (double)x->peak / (1 << 20));
        gc_cache_free(x->cache);
    }
    gc_batch_sampler_free(&sampler);
    gc_pairs_free(&pairs);
    gc_bench_setup_free(&setup);
    gc_shutdown();
    return 0;
}
