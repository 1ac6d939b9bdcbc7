/* GradCache against a plain step, measured side by side in one run: step time and peak
 * memory at a fixed batch for several chunk sizes, and the ratios to the plain step (one
 * forward and one backward over the whole batch). Theory: the cached step does one extra
 * forward, so ~4/3 of the plain step's time, at a fraction of its memory.
 * The model: two MLP towers (in -> hidden -> dim, gelu, dropout 0.1) and in-batch InfoNCE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_tower.h"
#include "bench_util.h"
#include "gradcache/gradcache.h"

static void fail(const char *what) {
    fprintf(stderr, "bench_cache: %s: %s\n", what, gc_last_error());
    exit(1);
}

typedef struct measurement {
    double seconds; /* median */
    size_t peak;    /* live bytes */
} measurement;

static measurement measure(gc_cache *cache, const gc_batch *inputs, tower *towers, gc_device device, bool plain,
                           int reps) {
    double times[32];
    size_t peak = 0;
    for (int r = 0; r <= reps; r++) { /* the first run warms up caches and cuBLAS */
        gc_param_list_zero_grad(&towers[0].params);
        gc_param_list_zero_grad(&towers[1].params);
        gc_device_synchronize(device);
        gc_memory_reset_peak(device);
        double start = gc_seconds(), loss;
        gc_status status = plain ? gc_cache_full_batch_step(cache, inputs, &loss) : gc_cache_step(cache, inputs, &loss, NULL);
        if (status != GC_OK) fail("step");
        gc_device_synchronize(device);
        if (r > 0) times[r - 1] = gc_seconds() - start;
        size_t p = gc_memory_get_stats(device).peak_bytes;
        if (p > peak) peak = p;
    }
    return (measurement){gc_median(times, reps), peak};
}

int main(int argc, char **argv) {
    int64_t batch = 512, in = 64, hidden = 1024, dim = 128;
    int reps = 3;
    gc_device device = gc_cpu();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoll(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--hidden") == 0 && i + 1 < argc) hidden = atoll(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            const char *name = argv[++i];
            device = strcmp(name, "cuda") == 0 ? gc_cuda(0) : gc_cpu();
            if (strcmp(name, "cuda") != 0 && strcmp(name, "cpu") != 0) {
                fprintf(stderr, "bench_cache: --device is cpu or cuda, not '%s'\n", name);
                return 2;
            }
        } else {
            printf("usage: %s [--batch N] [--hidden H] [--device cpu|cuda] [--reps R]\n"
                   "Times a GradCache step against a plain step at one batch size, for chunk sizes\n"
                   "16, 32, 64, 128 and the whole batch, and prints the ratios.\n"
                   "Defaults: batch 512, hidden 1024, cpu, 3 repetitions (median).\n",
                   argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    if (batch < 1 || hidden < 1 || reps < 1 || reps > 32) {
        fprintf(stderr, "bench_cache: --batch and --hidden must be positive, --reps 1 to 32\n");
        return 2;
    }
    if (device.type == GC_DEVICE_CUDA && gc_cuda_device_count() < 1) {
        fprintf(stderr, "bench_cache: no CUDA device\n");
        return 2;
    }
    gc_generator init = {1, 0};
    tower towers[2] = {make_tower(in, hidden, dim, device, &init), make_tower(in, hidden, dim, device, &init)};
    gc_tensor *xq = gc_uniform(GC_SHAPE(batch, in), GC_F32, device, -1, 1, 2, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(batch, in), GC_F32, device, -1, 1, 3, 0);
    if (!xq || !xp) fail("inputs");
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.05};

    char name[16];
    printf("GradCache vs plain, two towers [%lld -> %lld -> %lld], batch %lld, %s, median of %d\n", (long long)in,
           (long long)hidden, (long long)dim, (long long)batch, gc_device_str(device, name, sizeof name), reps);
    gc_cache_config config = {.n_models = 2,
                              .models = {{&towers[0], tower_forward, batch, &towers[0].params},
                                         {&towers[1], tower_forward, batch, &towers[1].params}},
                              .loss = gc_contrastive_loss_fn(&options)};
    gc_cache *plain_cache = gc_cache_new(&config);
    measurement plain = measure(plain_cache, inputs, towers, device, true, reps);
    gc_cache_free(plain_cache);
    printf("  %-10s %6s %12s %14s %10s %10s\n", "mode", "chunk", "step ms", "peak bytes", "time/plain", "peak/plain");
    printf("  %-10s %6lld %12.2f %14zu %10.2f %10.2f\n", "plain", (long long)batch, 1e3 * plain.seconds, plain.peak, 1.0,
           1.0);
    const int64_t chunks[] = {16, 32, 64, 128, batch};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        if (chunks[c] > batch || (c + 1 < sizeof chunks / sizeof *chunks && chunks[c] == batch)) continue;
        config.models[0].chunk_size = config.models[1].chunk_size = chunks[c];
        gc_cache *cache = gc_cache_new(&config);
        measurement m = measure(cache, inputs, towers, device, false, reps);
        gc_cache_free(cache);
        printf("  %-10s %6lld %12.2f %14zu %10.2f %10.2f\n", "gradcache", (long long)chunks[c], 1e3 * m.seconds, m.peak,
               m.seconds / plain.seconds, (double)m.peak / (double)plain.peak);
    }
    gc_tensor_release(xq);
    gc_tensor_release(xp);
    for (int t = 0; t < 2; t++) free_tower(&towers[t]);
    return 0;
}
