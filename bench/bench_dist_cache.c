/* What sync suppression saves in a distributed Gradient Cache step (run under a launcher:
 * `gradcache launch -n 2 -- build/bench/bench_dist_cache`). For each chunk size, the same
 * step twice, side by side: with sync suppressed (the gradient buckets are reduced once, after
 * the step's last backward) and with a reduction after every chunk's backward (what a
 * data-parallel wrapper does when nobody suppresses it). Rank 0 prints, per step and rank,
 * the bucket all-reduces, the bytes they cover, the median step time, and the time relative
 * to the suppressed step: the slow-down table of the data-parallel guides, on this engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_tower.h"
#include "bench_util.h"

static void fail(const char *what) {
    fprintf(stderr, "bench_dist_cache: %s: %s\n", what, gc_last_error());
    exit(1);
}

typedef struct measurement {
    double seconds;       /* median step */
    int64_t all_reduces;  /* per step */
    int64_t bytes;        /* per step */
} measurement;

static measurement measure(gc_cache *cache, const gc_batch *inputs, gc_ddp *ddp, gc_device device, int reps) {
    double *times = malloc((size_t)reps * sizeof *times);
    if (!times) fail("host memory");
    gc_ddp_stats before = {0};
    for (int r = -1; r < reps; r++) { /* one warm-up step */
        gc_ddp_zero_grad(ddp);
        gc_device_synchronize(device);
        if (r == 0) before = gc_ddp_get_stats(ddp);
        double start = gc_seconds(), loss;
        if (gc_cache_step(cache, inputs, &loss, NULL) != GC_OK) fail("step");
        gc_device_synchronize(device);
        if (r >= 0) times[r] = gc_seconds() - start;
    }
    gc_ddp_stats after = gc_ddp_get_stats(ddp);
    measurement m = {gc_median(times, reps), (after.all_reduces - before.all_reduces) / reps,
                     (after.bytes - before.bytes) / reps};
    free(times);
    return m;
}

int main(int argc, char **argv) {
    int64_t batch = 256, in = 64, hidden = 1024, dim = 128;
    int reps = 3;
    bool cuda = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoll(argv[++i]);
        else if (strcmp(argv[i], "--hidden") == 0 && i + 1 < argc) hidden = atoll(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cuda") == 0) cuda = true;
        else {
            printf("usage: %s [--batch N] [--hidden H] [--reps R] [--cuda]\n"
                   "Run under a launcher (gradcache launch -n N -- %s). Times a distributed GradCache\n"
                   "step with sync suppressed and with a reduction after every chunk's backward, for\n"
                   "chunks of 16, 32, 64 and 128 rows; N rows per rank (default 256), towers [64 -> H ->\n"
                   "128] (H default 1024), the median of R steps (default 3). --cuda: NCCL on cuda:LOCAL_RANK.\n",
                   argv[0], argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    if (batch < 1 || hidden < 1 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_dist_cache: --batch and --hidden must be positive, --reps 1 to 100\n");
        return 2;
    }
    gc_dist_env env;
    if (gc_dist_env_read(&env) != GC_OK) fail("environment");
    gc_device device = cuda ? gc_cuda(env.local_rank) : gc_cpu();
    gc_process_group *group = gc_process_group_new(&env, &(gc_dist_options){cuda ? GC_DIST_NCCL : GC_DIST_TCP, 0, device});
    if (!group) fail("process group");
    gc_generator init = {1, 0};
    tower towers[2] = {make_tower(in, hidden, dim, device, &init), make_tower(in, hidden, dim, device, &init)};
    gc_param_list params = {0};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < towers[t].params.count; i++)
            gc_param_list_add(&params, t ? "passage" : "query", towers[t].params.items[i].name,
                              towers[t].params.items[i].tensor, false);
    gc_ddp *ddp = gc_ddp_new(group, &params, &(gc_ddp_options){0});
    if (!ddp) fail("bucketer");
    gc_tensor *xq = gc_uniform(GC_SHAPE(batch, in), GC_F32, device, -1, 1, 2 + 2 * (uint64_t)env.rank, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(batch, in), GC_F32, device, -1, 1, 3 + 2 * (uint64_t)env.rank, 0);
    if (!xq || !xp) fail("inputs");
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.05};
    gc_cache_config config = {.n_models = 2,
                              .models = {{&towers[0], tower_forward, batch, &towers[0].params},
                                         {&towers[1], tower_forward, batch, &towers[1].params}},
                              .loss = gc_contrastive_loss_fn(&options),
                              .group = group,
                              .ddp = ddp};
    char name[16];
    if (env.rank == 0) {
        printf("distributed GradCache, %d ranks (%s, %s), towers [%lld -> %lld -> %lld], %lld rows per rank, "
               "%lld parameter bytes in %d buckets, median of %d steps\n",
               env.world_size, cuda ? "nccl" : "tcp", gc_device_str(device, name, sizeof name), (long long)in,
               (long long)hidden, (long long)dim, (long long)batch, (long long)(gc_param_list_numel(&params) * 4),
               gc_ddp_get_stats(ddp).buckets, reps);
        printf("  %6s %9s  %-11s %11s %12s %10s %12s\n", "chunk", "backwards", "sync", "all-reduces", "MB reduced",
               "step ms", "time/once");
    }
    const int64_t chunks[] = {16, 32, 64, 128};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        if (chunks[c] > batch) continue;
        config.models[0].chunk_size = config.models[1].chunk_size = chunks[c];
        measurement m[2];
        for (int every = 0; every < 2; every++) {
            config.sync_every_backward = every;
            gc_cache *cache = gc_cache_new(&config);
            m[every] = measure(cache, inputs, ddp, device, reps);
            gc_cache_free(cache);
        }
        int64_t backwards = 2 * ((batch + chunks[c] - 1) / chunks[c]);
        for (int every = 0; env.rank == 0 && every < 2; every++)
            printf("  %6lld %9lld  %-11s %11lld %12.1f %10.1f %12.2f\n", (long long)chunks[c], (long long)backwards,
                   every ? "every chunk" : "once", (long long)m[every].all_reduces, (double)m[every].bytes / 1e6,
                   1e3 * m[every].seconds, m[every].seconds / m[0].seconds);
    }
    gc_ddp_free(ddp);
    gc_param_list_free(&params);
    for (int t = 0; t < 2; t++) free_tower(&towers[t]);
    gc_tensor_release(xq);
    gc_tensor_release(xp);
    gc_process_group_free(group);
    return 0;
}
