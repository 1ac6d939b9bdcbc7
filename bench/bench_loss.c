/* The tiled contrastive loss against the untiled one, side by side in one run: the time of
 * its value and gradients (gc_contrastive_value_and_grad, as GradCache's loss phase calls it)
 * and the bytes it allocates beyond its inputs, at several batch sizes. The untiled loss
 * holds the B x B scores, their softmax and their gradient; where those do not fit (an
 * allocation error, or past GC_MEM_LIMIT) it is reported as such and only the tiled loss is
 * timed. Cosine similarity, temperature 0.05, f32, random representations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

#define MAX_BATCHES 16

typedef struct measurement {
    gc_status status; /* GC_OK, or the memory error that stopped it */
    double seconds;   /* median */
    size_t working;   /* peak bytes beyond what was live before the call */
} measurement;

static measurement measure(const gc_tensor *q, const gc_tensor *p, const gc_contrastive_options *options,
                           gc_device device, int reps) {
    double times[32];
    measurement m = {GC_OK, 0, 0};
    for (int r = 0; r <= reps && m.status == GC_OK; r++) { /* the first run warms up */
        gc_device_synchronize(device);
        size_t before = gc_memory_get_stats(device).live_bytes;
        gc_memory_reset_peak(device);
        double start = gc_seconds(), value;
        gc_tensor *gq = NULL, *gp = NULL;
        m.status = gc_contrastive_value_and_grad(q, p, options, 1, &value, &gq, &gp);
        gc_device_synchronize(device);
        if (r > 0) times[r - 1] = gc_seconds() - start;
        size_t working = gc_memory_get_stats(device).peak_bytes - before;
        if (working > m.working) m.working = working;
        gc_tensor_release(gq);
        gc_tensor_release(gp);
    }
    if (m.status == GC_OK) m.seconds = gc_median(times, reps);
    else if (m.status != GC_ERR_OUT_OF_MEMORY && m.status != GC_ERR_MEM_LIMIT) {
        fprintf(stderr, "bench_loss: %s\n", gc_last_error());
        exit(1);
    }
    gc_clear_error();
    return m;
}

static void print_bytes(size_t bytes) { printf(" %12.1f", (double)bytes / (1024.0 * 1024.0)); }

int main(int argc, char **argv) {
    int64_t batches[MAX_BATCHES] = {4096, 16384}, dim = 32, tile = 0;
    int n_batches = 2, reps = 3;
    gc_device device = gc_cpu();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
            n_batches = 0;
            for (char *text = argv[++i], *end; *text && n_batches < MAX_BATCHES; text = *end ? end + 1 : end)
                batches[n_batches++] = strtoll(text, &end, 10);
        } else if (strcmp(argv[i], "--dim") == 0 && i + 1 < argc) dim = atoll(argv[++i]);
        else if (strcmp(argv[i], "--tile") == 0 && i + 1 < argc) tile = atoll(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && strcmp(argv[i + 1], "cuda") == 0) {
            device = gc_cuda(0);
            i++;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && strcmp(argv[i + 1], "cpu") == 0) {
            i++;
        } else {
            printf("usage: %s [--batches B1,B2,...] [--dim D] [--tile T] [--device cpu|cuda] [--reps R]\n"
                   "Times the contrastive loss's value and gradients, tiled and untiled, and prints the\n"
                   "ratio and the bytes each allocates. Defaults: batches 4096,16384, dim 32, the\n"
                   "device's default tile, cpu, 3 repetitions (median).\n",
                   argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    bool valid = dim >= 1 && tile >= 0 && reps >= 1 && reps <= 32 && n_batches >= 1;
    for (int b = 0; b < n_batches; b++) valid = valid && batches[b] >= 1;
    if (!valid) {
        fprintf(stderr, "bench_loss: --batches and --dim must be positive, --tile >= 0, --reps 1 to 32\n");
        return 2;
    }
    if (device.type == GC_DEVICE_CUDA && gc_cuda_device_count() < 1) {
        fprintf(stderr, "bench_loss: no CUDA device\n");
        return 2;
    }
    char name[16];
    printf("contrastive loss, value and gradients, tiled against untiled: dim %lld, cosine, f32, %s, median of %d\n",
           (long long)dim, gc_device_str(device, name, sizeof name), reps);
    printf("  %8s %6s %12s %12s %12s %12s %12s\n", "batch", "tile", "tiled ms", "full ms", "tiled/full", "tiled MiB",
           "full MiB");
    for (int b = 0; b < n_batches; b++) {
        gc_tensor *q = gc_uniform(GC_SHAPE(batches[b], dim), GC_F32, device, -1, 1, 1, 0);
        gc_tensor *p = gc_uniform(GC_SHAPE(batches[b], dim), GC_F32, device, -1, 1, 2, 0);
        if (!q || !p) {
            fprintf(stderr, "bench_loss: the representations: %s\n", gc_last_error());
            return 1;
        }
        gc_contrastive_options tiled = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                        .method = GC_CONTRASTIVE_TILED, .tile_size = tile};
        gc_contrastive_options full = tiled;
        full.method = GC_CONTRASTIVE_FULL;
        measurement t = measure(q, p, &tiled, device, reps), f = measure(q, p, &full, device, reps);
        printf("  %8lld %6lld", (long long)batches[b], (long long)gc_contrastive_tile_size(&tiled, device, batches[b]));
        if (t.status == GC_OK) printf(" %12.1f", 1e3 * t.seconds);
        else printf(" %12s", "no fit");
        if (f.status == GC_OK) printf(" %12.1f %12.2f", 1e3 * f.seconds, t.seconds / f.seconds);
        else printf(" %12s %12s", "no fit", "-");
        print_bytes(t.working);
        if (f.status == GC_OK) print_bytes(f.working);
        else printf(" %12s", "-");
        putchar('\n');
        fflush(stdout);
        gc_tensor_release(q);
        gc_tensor_release(p);
    }
    return 0;
}
