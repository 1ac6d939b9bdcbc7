/* What ZeRO saves in a distributed Gradient Cache step, measured: for world sizes 1, 2 and 4 on
 * the CPU (processes started by gc_launch, the library's launcher), ZeRO-0, 1, 2a (reduce once
 * per step) and 2b (reduce after every chunk's backward), f32 and f16, a dual encoder of the
 * `small` size (two towers of nn's text encoder: dim 128, 4 heads, 4 layers, MLP 512,
 * projection 128) trained with AdamW, clipping, and in f16 the loss scaler. Each row is one
 * rank's peak live bytes during a step, split by memory role at the moment of the peak
 * (gc_memory_stats.role_peak_bytes: exact), the rank whose peak is highest; the bytes that rank
 * sent per step (measured by the TCP ring) and the collectives it ran. Run with --help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

typedef struct options {
    int64_t rows, chunk, length, bucket_kib;
    int steps;
} options;

static void fail(const char *what) {
    fprintf(stderr, "bench_zero: %s: %s\n", what, gc_last_error());
    exit(1);
}

/* One configuration's figures on one rank, in the order they are printed. */
enum { PARAMETERS, GRADIENTS, OPTIMIZER, OTHER, PEAK, SENT, COLLECTIVES, MILLISECONDS, FIGURES };

typedef struct model {
    gc_text_encoder towers[2];
    gc_param_list tower_params[2], params; /* each tower's, both */
} model;

static void make_model(model *m, gc_dtype dtype, int64_t length) {
    gc_text_encoder_config small = {.vocab = GC_TOKEN_VOCAB, .max_length = length, .dim = 128, .heads = 4, .layers = 4,
                                    .hidden = 512, .projection = 128, .dropout = 0.1, .activation = GC_ACT_GELU_ERF,
                                    .pooling = GC_POOL_MEAN, .dtype = dtype};
    gc_generator init = {1, 0};
    gc_memory_role previous = gc_memory_set_role(GC_MEMORY_PARAMETERS);
    *m = (model){0};
    for (int t = 0; t < 2; t++) {
        if (gc_text_encoder_init(&m->towers[t], &small, gc_cpu(), &init) != GC_OK) fail("the model");
        gc_text_encoder_params(&m->towers[t], t ? "passage" : "query", &m->params);
        gc_text_encoder_params(&m->towers[t], t ? "passage" : "query", &m->tower_params[t]);
    }
    gc_memory_set_role(previous);
}

static void free_model(model *m) {
    gc_param_list_free(&m->params);
    for (int t = 0; t < 2; t++) gc_param_list_free(&m->tower_params[t]);
    for (int t = 0; t < 2; t++) gc_text_encoder_free(&m->towers[t]);
}

static gc_tensor *forward(void *tower, const gc_batch *chunk) {
    return gc_text_encoder_forward(tower, chunk->tensors[0], chunk->tensors[1], true);
}

/* ids i32 [rows, length] of random bytes after [CLS], every position real (mask of ones). */
static void make_tokens(int64_t rows, int64_t length, gc_dtype dtype, uint64_t seed, gc_tensor **ids, gc_tensor **mask) {
    int32_t *values = malloc((size_t)(rows * length) * sizeof *values);
    if (!values) fail("host memory");
    uint64_t state = seed * 0x9E3779B97F4A7C15u + 1;
    for (int64_t i = 0; i < rows * length; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        values[i] = i % length == 0 ? GC_TOKEN_CLS : GC_TOKEN_FIRST_BYTE + (int32_t)(state >> 56);
    }
    *ids = gc_from_host(values, GC_SHAPE(rows, length), GC_I32, gc_cpu());
    *mask = gc_ones(GC_SHAPE(rows, length), dtype, gc_cpu());
    free(values);
    if (!*ids || !*mask) fail("the batch");
}

/* One training step: the cached step, the loss scaler's verdict, clipping, the update. True when
 * the update was taken. */
static bool train_step(gc_cache *cache, const gc_batch *inputs, gc_ddp *ddp, gc_zero_adamw *opt, gc_loss_scaler *scaler) {
    double loss;
    if (gc_cache_step(cache, inputs, &loss, NULL) != GC_OK) fail("the step");
    bool found_inf = false;
    if (scaler && gc_zero_adamw_check_grads(opt, &found_inf) != GC_OK) fail("the loss scaler's check");
    if (!found_inf) {
        double grad_scale = scaler ? 1 / scaler->scale : 1;
        gc_zero_adamw_clip_grad_scale(opt, 1.0, &grad_scale);
        if (gc_zero_adamw_step_scaled(opt, grad_scale) != GC_OK) fail("the update");
    }
    if (scaler) gc_loss_scaler_update(scaler, found_inf);
    gc_ddp_zero_grad(ddp);
    return !found_inf;
}

/* The figures of one configuration on this rank. */
static void measure(gc_process_group *group, gc_dtype dtype, gc_zero zero, const options *o, double *figures) {
    gc_device cpu = gc_cpu();
    gc_memory_stats base = gc_memory_get_stats(cpu);
    model m;
    make_model(&m, dtype, o->length);
    size_t bucket = (size_t)o->bucket_kib << 10;
    gc_ddp *ddp = gc_ddp_new(group, &m.params, &(gc_ddp_options){bucket, bucket, false, true, zero});
    if (!ddp) fail("the bucketer");
    gc_zero_adamw *opt = gc_zero_adamw_new(ddp, 1e-4, 0.9, 0.999, 1e-8, 0.01);
    gc_tensor *ids[2], *mask[2];
    for (int t = 0; t < 2; t++) make_tokens(o->rows, o->length, dtype, 10 * (uint64_t)gc_dist_rank(group) + t, &ids[t], &mask[t]);
    gc_batch inputs[2] = {{2, {"ids", "mask"}, {ids[0], mask[0]}}, {2, {"ids", "mask"}, {ids[1], mask[1]}}};
    gc_contrastive_options loss = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 1024; /* a small model's first gradients: no overflow to skip at first */
    gc_cache_config config = {.n_models = 2,
                              .models = {{&m.towers[0], forward, o->chunk, &m.tower_params[0]},
                                         {&m.towers[1], forward, o->chunk, &m.tower_params[1]}},
                              .loss = gc_contrastive_loss_fn(&loss),
                              .scaler = dtype == GC_F16 ? &scaler : NULL,
                              .group = group,
                              .ddp = ddp};
    gc_cache *cache = gc_cache_new(&config);
    gc_loss_scaler *scaling = dtype == GC_F16 ? &scaler : NULL;
    /* the first step allocates the optimizer's state: measured from the second on */
    for (int tries = 0; !train_step(cache, inputs, ddp, opt, scaling); tries++)
        if (tries == 5) fail("five steps skipped for an overflow");
    gc_memory_reset_peak(cpu);
    gc_dist_stats before = gc_dist_get_stats(group);
    double start = gc_seconds();
    for (int s = 0; s < o->steps; s++)
        if (!train_step(cache, inputs, ddp, opt, scaling)) fail("a measured step was skipped");
    double seconds = (gc_seconds() - start) / o->steps;
    gc_memory_stats stats = gc_memory_get_stats(cpu);
    gc_dist_stats after = gc_dist_get_stats(group);
    const gc_memory_role roles[] = {GC_MEMORY_PARAMETERS, GC_MEMORY_GRADIENTS, GC_MEMORY_OPTIMIZER, GC_MEMORY_OTHER};
    for (int r = 0; r < 4; r++) figures[r] = (double)(stats.role_peak_bytes[roles[r]] - base.role_live_bytes[roles[r]]);
    figures[PEAK] = (double)(stats.peak_bytes - base.live_bytes);
    figures[SENT] = (double)(after.sent_bytes - before.sent_bytes) / o->steps;
    figures[COLLECTIVES] = (double)(after.collectives - before.collectives) / o->steps;
    figures[MILLISECONDS] = 1e3 * seconds;
    gc_cache_free(cache);
    gc_zero_adamw_free(opt);
    gc_ddp_free(ddp);
    free_model(&m);
    for (int t = 0; t < 2; t++) gc_tensor_release(ids[t]), gc_tensor_release(mask[t]);
}

/* A rank of one world: every configuration; rank 0 prints the row of the rank whose peak is
 * highest. */
static int run_rank(const options *o) {
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_TCP, 0, gc_cpu()});
    if (!group) fail("the process group");
    int world = gc_dist_world_size(group);
    const gc_dtype dtypes[] = {GC_F32, GC_F16};
    const gc_zero stages[] = {GC_ZERO_0, GC_ZERO_1, GC_ZERO_2, GC_ZERO_2_EVERY_BACKWARD};
    const char *names[] = {"0", "1", "2a", "2b"};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 4; s++) {
            double mine[FIGURES], all[16 * FIGURES];
            measure(group, dtypes[d], stages[s], o, mine);
            if (gc_dist_all_gather_host(group, mine, sizeof mine, all) != GC_OK) fail("gathering the figures");
            int top = 0;
            for (int r = 1; r < world; r++) top = all[r * FIGURES + PEAK] > all[top * FIGURES + PEAK] ? r : top;
            const double *f = all + top * FIGURES;
            if (gc_dist_rank(group) == 0)
                printf("| %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f |\n", world,
                       gc_dtype_name(dtypes[d]), names[s], f[PARAMETERS] / 1e6, f[GRADIENTS] / 1e6, f[OPTIMIZER] / 1e6,
                       f[OTHER] / 1e6, f[PEAK] / 1e6, f[SENT] / 1e6, f[COLLECTIVES], f[MILLISECONDS]);
            fflush(stdout);
        }
    gc_process_group_free(group);
    return 0;
}

/* The parent: each world started with gc_launch, its rank 0's rows (written to a log folder)
 * printed under one header. */
static int run_worlds(char **argv, const int *worlds, int n_worlds, const options *o) {
    printf("per-rank peak MB during a step (split at the peak), %lld pairs per rank, chunks of %lld, %lld tokens, "
           "buckets of %lld KiB\n\n", (long long)o->rows, (long long)o->chunk, (long long)o->length,
           (long long)o->bucket_kib);
    printf("| world | dtype | ZeRO | parameters | gradients | optimizer | activations & other | peak | MB sent "
           "| collectives | step ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    char dir[] = "/tmp/bench_zero_XXXXXX", path[64];
    if (!mkdtemp(dir)) fail("a log folder");
    char *child[16] = {argv[0], "--rank"};
    for (int i = 1; argv[i] && i < 14; i++) child[i + 1] = argv[i];
    for (int w = 0; w < n_worlds; w++) {
        int status = gc_launch(&(gc_launch_options){.nproc = worlds[w], .log_dir = dir}, child);
        for (int r = 0; r < worlds[w]; r++)
            for (int e = 0; e < 2; e++) {
                snprintf(path, sizeof path, "%s/rank_%d.%s", dir, r, e ? "err" : "out");
                FILE *log = fopen(path, "r");
                char line[512];
                while (log && fgets(line, sizeof line, log)) fputs(line, e ? stderr : stdout);
                if (log) fclose(log);
                unlink(path);
            }
        if (status != 0) fail("a world's run");
    }
    rmdir(dir);
    return 0;
}

int main(int argc, char **argv) {
    options o = {.rows = 32, .chunk = 8, .length = 32, .bucket_kib = 1024, .steps = 2};
    int worlds[3] = {1, 2, 4}, n_worlds = 3;
    bool rank = false;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--rank") == 0) rank = true;
        else if (strcmp(argv[i], "--rows") == 0 && value) o.rows = atoll(argv[++i]);
        else if (strcmp(argv[i], "--chunk") == 0 && value) o.chunk = atoll(argv[++i]);
        else if (strcmp(argv[i], "--bucket-kib") == 0 && value) o.bucket_kib = atoll(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && value) o.steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--world") == 0 && value) worlds[0] = atoi(argv[++i]), n_worlds = 1;
        else {
            printf("usage: %s [--rows N] [--chunk C] [--bucket-kib K] [--steps S] [--world W]\n"
                   "Prints a markdown table of per-rank peak memory, split by role, bytes sent and collectives per\n"
                   "step, for worlds of 1, 2 and 4 processes (or W), ZeRO 0/1/2a/2b, f32 and f16: N pairs per rank\n"
                   "(default 32) in chunks of C (8), buckets of K KiB (1024), the mean of S steps (2) after one.\n",
                   argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (o.rows < 1 || o.chunk < 1 || o.bucket_kib < 1 || o.steps < 1 || worlds[0] < 1 || worlds[0] > 16) {
        fprintf(stderr, "bench_zero: sizes must be positive, --world 1 to 16\n");
        return 2;
    }
    return rank ? run_rank(&o) : run_worlds(argv, worlds, n_worlds, &o);
}
