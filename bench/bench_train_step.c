/* One training step of the trainer's model, timed: the dual encoder of a `gradcache train`
 * preset (gradcache/train.h) on a batch of real pairs (--pairs, tokenized and padded as the
 * trainer does it) or a synthetic one, the plain step or the Gradient Cache step
 * (keep_last_graph, as the trainer runs it), then gradient clipping and AdamW with the
 * trainer's constants. The batch can be written to a file, so that bench/compare_torch.py
 * runs PyTorch on the very same tokens.
 *
 * Prints one line per measured step ("step_ms <ms>") and a summary line, for the driver
 * (bench/compare_torch.py) to read; run with --help for the flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

/* The trainer's constants (train/trainer_internal.h): clipping, AdamW, the loss. */
#define MAX_GRAD_NORM 1.0
#define WEIGHT_DECAY 0.01
#define TEMPERATURE 0.05
#define LEARNING_RATE 1e-4

typedef struct options {
    int model_size;     /* index into gc_model_size_names */
    int64_t batch;      /* query/passage pairs */
    int64_t chunk;      /* GradCache rows per chunk; 0: the plain step */
    int64_t max_length; /* tokens per text */
    int warmup, reps;
    const char *batch_file; /* where to write the batch, or NULL */
    const char *pairs;      /* query<TAB>passage lines, the first `batch` of them the batch; NULL: synthetic */
} options;

static void fail(const char *what) {
    fprintf(stderr, "bench_train_step: %s: %s\n", what, gc_last_error());
    exit(1);
}

static int usage(const char *program, int status) {
    fprintf(status ? stderr : stdout,
            "usage: %s [--model-size tiny|small|base] [--batch N] [--gc-chunk N] [--max-length T]\n"
            "          [--warmup W] [--reps R] [--pairs TSV] [--batch-file PATH]\n"
            "Times training steps of the trainer's dual encoder (plain, or Gradient Cache with --gc-chunk N),\n"
            "each with clipping and AdamW. --pairs: the batch is the file's first N query<TAB>passage lines,\n"
            "byte-tokenized, each side padded to its longest text (as the trainer pads); without it, a\n"
            "synthetic batch of max-length rows. --batch-file writes the batch: int64 N, T, T' (the\n"
            "queries' and the passages' lengths), then query ids i32 [N, T], query mask f32 [N, T], passage\n"
            "ids i32 [N, T'], passage mask f32 [N, T'], raw little-endian. GC_NUM_THREADS sets the threads.\n"
            "Defaults: small, batch 128, plain, max length 32, 1 warm-up, 5 repetitions.\n",
            program);
    return status;
}

/* 0 when parsed, else the exit status. */
static int parse(int argc, char **argv, options *o) {
    *o = (options){.model_size = 1, .batch = 128, .max_length = 32, .warmup = 1, .reps = 5};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) return usage(argv[0], 0) - 1;
        if (!value) return usage(argv[0], 2);
        i++;
        if (strcmp(flag, "--model-size") == 0) {
            o->model_size = -1;
            for (int s = 0; gc_model_size_names[s]; s++)
                if (strcmp(value, gc_model_size_names[s]) == 0) o->model_size = s;
            if (o->model_size < 0) return usage(argv[0], 2);
        } else if (strcmp(flag, "--batch") == 0) o->batch = atoll(value);
        else if (strcmp(flag, "--gc-chunk") == 0) o->chunk = atoll(value);
        else if (strcmp(flag, "--max-length") == 0) o->max_length = atoll(value);
        else if (strcmp(flag, "--warmup") == 0) o->warmup = atoi(value);
        else if (strcmp(flag, "--reps") == 0) o->reps = atoi(value);
        else if (strcmp(flag, "--batch-file") == 0) o->batch_file = value;
        else if (strcmp(flag, "--pairs") == 0) o->pairs = value;
        else return usage(argv[0], 2);
    }
    if (o->batch < 1 || o->chunk < 0 || o->max_length < 2 || o->warmup < 0 || o->reps < 1 || o->reps > 1000) {
        fprintf(stderr, "bench_train_step: --batch, --max-length, --reps must be positive, --gc-chunk, --warmup >= 0\n");
        return 2;
    }
    return 0;
}

/* tensors: query ids [N, T], query mask [N, T], passage ids [N, T'], passage mask [N, T']. */
static void write_batch(const char *path, gc_tensor *const *tensors) {
    FILE *file = fopen(path, "wb");
    if (!file) {
        perror(path);
        exit(1);
    }
    int64_t shape[3] = {tensors[0]->shape[0], tensors[0]->shape[1], tensors[2]->shape[1]};
    if (fwrite(shape, sizeof shape, 1, file) != 1) {
        perror(path);
        exit(1);
    }
    for (int i = 0; i < 4; i++)
        if (fwrite(gc_data(tensors[i]), 1, gc_nbytes(tensors[i]), file) != gc_nbytes(tensors[i])) {
            perror(path);
            exit(1);
        }
    if (fclose(file) != 0) {
        perror(path);
        exit(1);
    }
}

/* tensors: query ids, query mask, passage ids, passage mask, [batch, max_length] each. */
static void synthetic_batch(const options *o, gc_device device, gc_tensor **tensors) {
    gc_generator data = {3, 0};
    for (int side = 0; side < 2; side++)
        if (gc_synthetic_tokens(gc_tokenizer_bytes(), o->batch, o->max_length, GC_F32, device, &data,
                                &tensors[2 * side], &tensors[2 * side + 1]) != GC_OK)
            fail("the batch");
}

/* tensors: query ids and mask [batch, T], passage ids and mask [batch, T'] of the file's first
 * `batch` pairs, each side padded to its longest text (gc_training_batch_make, the trainer's). */
static void read_pairs(const options *o, gc_device device, gc_tensor **tensors) {
    gc_pairs pairs;
    if (gc_pairs_read(o->pairs, &pairs) != GC_OK) fail(o->pairs);
    if (pairs.count < o->batch) {
        fprintf(stderr, "bench_train_step: %s has %lld pairs, --batch is %lld\n", o->pairs, (long long)pairs.count,
                (long long)o->batch);
        exit(1);
    }
    int64_t *examples = malloc((size_t)o->batch * sizeof *examples);
    if (!examples) exit(1);
    for (int64_t i = 0; i < o->batch; i++) examples[i] = i;
    gc_training_batch batch;
    if (gc_training_batch_make(&pairs, examples, o->batch, 0, gc_tokenizer_bytes(), NULL, o->max_length, GC_F32,
                               device, &batch) != GC_OK)
        fail("the batch");
    gc_tensor *made[4] = {batch.query_ids, batch.query_mask, batch.passage_ids, batch.passage_mask};
    for (int i = 0; i < 4; i++) tensors[i] = gc_tensor_retain(made[i]);
    gc_training_batch_release(&batch);
    free(examples);
    gc_pairs_free(&pairs);
}

int main(int argc, char **argv) {
    options o;
    int parsed = parse(argc, argv, &o);
    if (parsed) return parsed < 0 ? 0 : parsed;
    gc_device device = gc_cpu();
    gc_manual_seed(1);
    gc_text_encoder_config config = gc_model_preset(o.model_size, o.max_length);
    gc_dual_encoder model;
    if (gc_dual_encoder_init(&model, &config, false, device, 2) != GC_OK) fail("the model");
    gc_adamw optimizer;
    if (gc_adamw_init(&optimizer, &model.params, LEARNING_RATE, 0.9, 0.999, 1e-8, WEIGHT_DECAY) != GC_OK)
        fail("the optimizer");

    gc_tensor *tensors[4];
    if (o.pairs) read_pairs(&o, device, tensors);
    else synthetic_batch(&o, device, tensors);
    if (o.batch_file) write_batch(o.batch_file, tensors);
    gc_batch inputs[2] = {{2, {"ids", "mask"}, {tensors[0], tensors[1]}},
                          {2, {"ids", "mask"}, {tensors[2], tensors[3]}}};

    gc_contrastive_options loss = {
        .similarity = GC_SIMILARITY_COSINE, .temperature = TEMPERATURE, .reduction = GC_LOSS_MEAN};
    int64_t chunk = o.chunk ? o.chunk : o.batch;
    gc_cache_config cache_config = {
        .n_models = 2,
        .models = {{gc_dual_encoder_tower(&model, 0), gc_dual_encoder_forward_train, chunk, &model.params},
                   {gc_dual_encoder_tower(&model, 1), gc_dual_encoder_forward_train, chunk, &model.params}},
        .loss = gc_contrastive_loss_fn(&loss),
        .keep_last_graph = true,
    };
    gc_cache *cache = gc_cache_new(&cache_config);

    double *seconds = malloc((size_t)o.reps * sizeof *seconds);
    if (!seconds) return 1;
    for (int run = 0; run < o.warmup + o.reps; run++) {
        double value, start = gc_seconds();
        gc_status status = o.chunk ? gc_cache_step(cache, inputs, &value, NULL)
                                   : gc_cache_full_batch_step(cache, inputs, &value);
        if (status != GC_OK) fail("the step");
        gc_clip_grad_norm(&model.params, MAX_GRAD_NORM);
        if (gc_adamw_step(&optimizer) != GC_OK) fail("the update");
        gc_param_list_zero_grad(&model.params);
        double elapsed = gc_seconds() - start;
        if (run < o.warmup) continue;
        seconds[run - o.warmup] = elapsed;
        printf("step_ms %.3f\n", 1e3 * elapsed);
    }
    printf("median_ms %.3f  (%s, batch %lld, %s, %d steps after %d warm-up)\n", 1e3 * gc_median(seconds, o.reps),
           gc_model_size_names[o.model_size], (long long)o.batch, o.chunk ? "gradcache" : "plain", o.reps, o.warmup);
    free(seconds);
    gc_cache_free(cache);
    for (int i = 0; i < 4; i++) gc_tensor_release(tensors[i]);
    gc_adamw_free(&optimizer);
    gc_dual_encoder_free(&model);
    return 0;
}
