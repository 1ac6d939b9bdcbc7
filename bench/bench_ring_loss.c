/* The ring contrastive loss against the all-gather loss across processes, side by side in
 * one run (under a launcher: `gradcache launch -n 4 -- build/bench/bench_ring_loss`). For
 * each global batch, each method's value and this rank's rows of both gradients, as Gradient
 * Cache's loss phase needs them:
 *   - gather: every rank's rows all-gathered (gc_dist_all_gather), the tiled loss over the
 *     global batch, this rank's rows of its gradients kept (copied, as Gradient Cache does);
 *   - ring: gc_contrastive_loss_ring on this rank's rows.
 * Rank 0 prints, per method, the largest over the ranks of the peak bytes a rank allocates
 * beyond its own inputs (gc_memory_get_stats: exact), the slowest rank's median time, and the
 * loss (the same for both). Cosine, temperature 0.05, symmetric, f32, random representations;
 * each rank has an equal share of the queries (the first ones one more), each query K
 * passages: its positive and K - 1 hard negatives (K = 1: in-batch negatives only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

#define MAX_SIZES 16

static void fail(const char *what) {
    fprintf(stderr, "bench_ring_loss: %s: %s\n", what, gc_last_error());
    exit(1);
}

typedef enum method { GATHER, RING } method;

/* The all-gather loss: its value and this rank's rows of the gradients (new tensors). */
static gc_status gathered_loss(gc_process_group *group, const gc_tensor *q, const gc_tensor *p,
                               const gc_contrastive_options *options, double *value, gc_tensor **grads) {
    int world = gc_dist_world_size(group), rank = gc_dist_rank(group);
    int64_t counts[2][64], start[2] = {0, 0};
    gc_tensor *all[2] = {gc_dist_all_gather(group, q, counts[0]), gc_dist_all_gather(group, p, counts[1])};
    if (!all[0] || !all[1]) fail("all-gather");
    gc_tensor *global[2] = {NULL, NULL};
    gc_status status = gc_contrastive_loss_tiled(all[0], all[1], options, 1, value, &global[0], &global[1]);
    for (int s = 0; s < 2 && status == GC_OK; s++) {
        for (int r = 0; r < rank && r < world; r++) start[s] += counts[s][r];
        gc_tensor *mine = gc_slice0(global[s], start[s], start[s] + (s ? p : q)->shape[0]);
        grads[s] = gc_clone(mine);
        gc_tensor_release(mine);
        if (!grads[s]) status = gc_last_status();
    }
    for (int s = 0; s < 2; s++) {
        gc_tensor_release(global[s]);
        gc_tensor_release(all[s]);
    }
    return status;
}

typedef struct measurement {
    double seconds; /* the slowest rank's median */
    size_t peak;    /* the largest over the ranks of the bytes allocated beyond the inputs */
    double value;
} measurement;

static measurement measure(gc_process_group *group, const gc_tensor *q, const gc_tensor *p,
                           const gc_contrastive_options *options, method m, int reps) {
    double times[32];
    measurement result = {0, 0, 0};
    for (int r = 0; r < reps; r++) {
        if (gc_dist_barrier(group) != GC_OK) fail("barrier");
        size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
        gc_memory_reset_peak(gc_cpu());
        double start = gc_seconds();
        gc_tensor *grads[2] = {NULL, NULL};
        gc_status status = m == RING ? gc_contrastive_loss_ring(group, q, p, options, 1, &result.value, &grads[0],
                                                                &grads[1])
                                     : gathered_loss(group, q, p, options, &result.value, grads);
        if (status != GC_OK) fail(m == RING ? "ring loss" : "all-gather loss");
        times[r] = gc_seconds() - start;
        size_t peak = gc_memory_get_stats(gc_cpu()).peak_bytes - live;
        if (peak > result.peak) result.peak = peak;
        gc_tensor_release(grads[0]);
        gc_tensor_release(grads[1]);
    }
    /* the slowest rank's time and the largest rank's peak: one MAX all-reduce */
    double mine[2] = {gc_median(times, reps), (double)result.peak};
    gc_tensor *both = gc_from_host(mine, GC_SHAPE(2), GC_F64, gc_cpu());
    if (!both || gc_dist_all_reduce(group, both, GC_DIST_MAX) != GC_OK) fail("all-reduce");
    result.seconds = ((const double *)gc_data(both))[0];
    result.peak = (size_t)((const double *)gc_data(both))[1];
    gc_tensor_release(both);
    return result;
}

static void usage(const char *program) {
    printf("usage: %s [--passages P1,P2,...] [--candidates K] [--dim D] [--reps R] [--method ring|gather|both]\n"
           "Run under a launcher (gradcache launch -n N -- %s). For each global batch of P passages\n"
           "(default 8192) and P / K queries (K default 1: in-batch; else K - 1 hard negatives each),\n"
           "D wide (default 16), prints each method's largest per-rank peak of bytes allocated beyond\n"
           "the rank's inputs, the slowest rank's median time of R runs (default 1) and the loss.\n",
           program, program);
}

int main(int argc, char **argv) {
    int64_t passages[MAX_SIZES] = {8192}, candidates = 1, dim = 16;
    int n_sizes = 1, reps = 1;
    bool methods[2] = {true, true};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--passages") == 0 && i + 1 < argc) {
            n_sizes = 0;
            for (char *text = argv[++i], *end; *text && n_sizes < MAX_SIZES; text = *end ? end + 1 : end)
                passages[n_sizes++] = strtoll(text, &end, 10);
        } else if (strcmp(argv[i], "--candidates") == 0 && i + 1 < argc) candidates = atoll(argv[++i]);
        else if (strcmp(argv[i], "--dim") == 0 && i + 1 < argc) dim = atoll(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--method") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            methods[GATHER] = strcmp(m, "ring") != 0;
            methods[RING] = strcmp(m, "gather") != 0;
        } else {
            usage(argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    bool valid = dim >= 1 && candidates >= 1 && reps >= 1 && reps <= 32 && n_sizes >= 1;
    for (int s = 0; s < n_sizes; s++) valid = valid && passages[s] >= candidates && passages[s] % candidates == 0;
    if (!valid) {
        fprintf(stderr, "bench_ring_loss: --passages must be positive multiples of --candidates, --dim >= 1, "
                        "--reps 1 to 32\n");
        return 2;
    }
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_TCP, 0, gc_cpu()});
    if (!group) fail("process group");
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    if (world > 64) fail("more than 64 ranks");
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05, .symmetric = true};
    if (rank == 0) {
        printf("ring against all-gather loss: %d ranks (tcp, cpu), dim %lld, f32, cosine, symmetric, %lld "
               "passage%s per query, median of %d\n",
               world, (long long)dim, (long long)candidates, candidates > 1 ? "s" : "", reps);
        printf("| ranks | queries | passages | method | MiB per rank | ms | loss |\n"
               "| --- | --- | --- | --- | --- | --- | --- |\n");
    }
    for (int s = 0; s < n_sizes; s++) {
        int64_t total_queries = passages[s] / candidates;
        int64_t mine = total_queries / world + (rank < total_queries % world ? 1 : 0);
        gc_tensor *q = gc_uniform(GC_SHAPE(mine, dim), GC_F32, gc_cpu(), -1, 1, 1 + 2 * (uint64_t)rank, 0);
        gc_tensor *p = gc_uniform(GC_SHAPE(mine * candidates, dim), GC_F32, gc_cpu(), -1, 1, 2 + 2 * (uint64_t)rank, 0);
        if (!q || !p) fail("inputs");
        for (int m = 0; m < 2; m++) {
            if (!methods[m]) continue;
            measurement r = measure(group, q, p, &options, (method)m, reps);
            if (rank == 0)
                printf("| %d | %lld | %lld | %s | %.2f | %.1f | %.6f |\n", world, (long long)total_queries,
                       (long long)passages[s], m == RING ? "ring" : "gather", (double)r.peak / (1024.0 * 1024.0),
                       1e3 * r.seconds, r.value);
            fflush(stdout);
        }
        gc_tensor_release(q);
        gc_tensor_release(p);
    }
    gc_process_group_free(group);
    gc_shutdown();
    return 0;
}
