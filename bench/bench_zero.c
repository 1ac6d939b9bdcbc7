/* What ZeRO saves in a distributed Gradient Cache step, measured: for world sizes 1, 2 and 4 on
 * the CPU (processes started by gc_launch, the library's launcher), ZeRO-0, 1, 2a (reduce once
 * per step) and 2b (reduce after every chunk's backward), f32 and f16, a dual encoder of the
 * `small` preset (two towers: dim 128, 4 heads, 4 layers, MLP 512, projection 128) or, with
 * --init DIR, a pretrained model folder's one tied encoder (all-MiniLM-L6-v2), trained with
 * AdamW, clipping, and in f16 the loss scaler. Each row is one
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
    const char *init; /* a pretrained model folder instead of the small preset */
} options;

static void fail(const char *what) {
    fprintf(stderr, "bench_zero: %s: %s\n", what, gc_last_error());
    exit(1);
}

/* One configuration's figures on one rank, in the order they are printed. */
enum { PARAMETERS, GRADIENTS, OPTIMIZER, OTHER, PEAK, SENT, COLLECTIVES, MILLISECONDS, FIGURES };

/* The model under the parameters' memory role: the `small` preset's dual encoder, or with
 * --init one tied encoder from a pretrained folder (gradcache/measure.h). */
static void make_setup(gc_bench_setup *setup, gc_dtype dtype, const options *o) {
    gc_memory_role previous = gc_memory_set_role(GC_MEMORY_PARAMETERS);
    gc_text_encoder_config small = gc_model_preset(1, o->length);
    small.dtype = dtype;
    gc_status status = o->init ? gc_bench_setup_from_folder(setup, o->init, o->length, dtype, 1, gc_cpu())
                               : gc_bench_setup_init(setup, &small, false, 1, gc_cpu());
    if (status != GC_OK) fail("the model");
    gc_memory_set_role(previous);
}

/* One training step: the cached step, the loss scaler's verdict, clipping, the update. True when
 * the update was taken. */
static bool train_step(gc_cache *cache, const gc_batch *inputs, gc_ddp *ddp, gc_zero_adamw *opt,
                       gc_loss_scaler *scaler) {
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
    gc_bench_setup setup;
    make_setup(&setup, dtype, o);
    size_t bucket = (size_t)o->bucket_kib << 10;
    gc_ddp *ddp = gc_ddp_new(group, &setup.model.params, &(gc_ddp_options){bucket, bucket, false, true, zero});
    if (!ddp) fail("the bucketer");
    gc_zero_adamw *opt = gc_zero_adamw_new(ddp, 1e-4, 0.9, 0.999, 1e-8, 0.01);
    setup.data = (gc_generator){10 + (uint64_t)gc_dist_rank(group), 0}; /* each rank its own texts */
    gc_bench_batch batch;
    if (gc_bench_batch_make(&setup, o->rows, &batch) != GC_OK) fail("the batch");
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 1024; /* a small model's first gradients: no overflow to skip at first */
    gc_cache_config config = gc_bench_cache_config(&setup, o->chunk);
    config.scaler = dtype == GC_F16 ? &scaler : NULL;
    config.group = group;
    config.ddp = ddp;
    gc_cache *cache = gc_cache_new(&config);
    gc_loss_scaler *scaling = dtype == GC_F16 ? &scaler : NULL;
    /* the first step allocates the optimizer's state: measured from the second on */
    for (int tries = 0; !train_step(cache, batch.inputs, ddp, opt, scaling); tries++)
        if (tries == 5) fail("five steps skipped for an overflow");
    gc_memory_reset_peak(cpu);
    gc_dist_stats before = gc_dist_get_stats(group);
    double start = gc_seconds();
    for (int s = 0; s < o->steps; s++)
        if (!train_step(cache, batch.inputs, ddp, opt, scaling)) fail("a measured step was skipped");
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
    gc_bench_batch_free(&batch);
    gc_bench_setup_free(&setup);
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
    printf("%s: per-rank peak MB during a step (split at the peak), %lld pairs per rank, chunks of %lld, %lld "
           "tokens, buckets of %lld KiB\n\n", o->init ? o->init : "the small preset", (long long)o->rows,
           (long long)o->chunk, (long long)o->length, (long long)o->bucket_kib);
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
        else if (strcmp(argv[i], "--length") == 0 && value) o.length = atoll(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && value) o.steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--init") == 0 && value) o.init = argv[++i];
        else if (strcmp(argv[i], "--world") == 0 && value) worlds[0] = atoi(argv[++i]), n_worlds = 1;
        else {
            printf("usage: %s [--init DIR] [--rows N] [--chunk C] [--length T] [--bucket-kib K] [--steps S]\n"
                   "       [--world W]\n"
                   "Prints a markdown table of per-rank peak memory, split by role, bytes sent and collectives per\n"
                   "step, for worlds of 1, 2 and 4 processes (or W), ZeRO 0/1/2a/2b, f32 and f16: the small preset\n"
                   "(or DIR's pretrained model), N pairs per rank (default 32) of T tokens (32) in chunks of C (8),\n"
                   "buckets of K KiB (1024), the mean of S steps (2) after one.\n",
                   argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (o.rows < 1 || o.chunk < 1 || o.length < 2 || o.bucket_kib < 1 || o.steps < 1 || worlds[0] < 1 ||
        worlds[0] > 16) {
        fprintf(stderr, "bench_zero: sizes must be positive, --length at least 2, --world 1 to 16\n");
        return 2;
    }
    return rank ? run_rank(&o) : run_worlds(argv, worlds, n_worlds, &o);
}
