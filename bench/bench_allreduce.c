/* All-reduce bandwidth of a process group versus message size (run under a launcher:
 * `gradcache launch -n 2 -- build/bench/bench_allreduce`). For each size: a warm-up, then
 * `reps` timed all-reduces of an f32 tensor, each started after a barrier; rank 0 prints
 * the median time, the algorithm bandwidth (bytes / time) and the bus bandwidth (algbw *
 * 2 (W-1) / W: what each rank's link carries in a ring, comparable across world sizes, as
 * nccl-tests report it), as CSV. bench/allreduce_compare.sh runs it beside gloo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

static void fail(const char *what) {
    fprintf(stderr, "bench_allreduce: %s: %s\n", what, gc_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    int reps = 10;
    int64_t max_bytes = 64 << 20;
    gc_dist_backend backend = GC_DIST_TCP;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) max_bytes = atoll(argv[++i]);
        else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            const char *name = argv[++i];
            if (strcmp(name, "tcp") != 0 && strcmp(name, "nccl") != 0) {
                fprintf(stderr, "bench_allreduce: --backend is tcp or nccl, not '%s'\n", name);
                return 2;
            }
            backend = strcmp(name, "nccl") == 0 ? GC_DIST_NCCL : GC_DIST_TCP;
        } else {
            printf("usage: %s [--backend tcp|nccl] [--max-bytes B] [--reps R]\n"
                   "Run under a launcher (gradcache launch -n N -- %s). Prints, on rank 0, CSV lines\n"
                   "bytes,seconds,algbw_gbps,busbw_gbps for f32 all-reduces of 4 KiB to B bytes (default\n"
                   "64 MiB), the median of R (default 10) after a warm-up. tcp: CPU tensors; nccl: cuda:LOCAL_RANK.\n",
                   argv[0], argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    if (reps < 1 || reps > 1000 || max_bytes < 4096) {
        fprintf(stderr, "bench_allreduce: --reps 1 to 1000, --max-bytes at least 4096\n");
        return 2;
    }
    gc_dist_env env;
    if (gc_dist_env_read(&env) != GC_OK) fail("environment");
    gc_device device = backend == GC_DIST_NCCL ? gc_cuda(env.local_rank) : gc_cpu();
    gc_process_group *group = gc_process_group_new(&env, &(gc_dist_options){backend, 0, device});
    if (!group) fail("process group");
    int world = gc_dist_world_size(group);
    double *times = malloc((size_t)reps * sizeof *times);
    if (!times) fail("host memory");
    if (env.rank == 0) printf("bytes,seconds,algbw_gbps,busbw_gbps\n");
    for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        gc_tensor *t = gc_ones(GC_SHAPE(bytes / 4), GC_F32, device);
        if (!t) fail("tensor");
        for (int r = -1; r < reps; r++) {
            if (gc_dist_barrier(group) != GC_OK) fail("barrier");
            gc_device_synchronize(device);
            double start = gc_seconds();
            if (gc_dist_all_reduce(group, t, GC_DIST_SUM) != GC_OK) fail("all_reduce");
            gc_device_synchronize(device);
            if (r >= 0) times[r] = gc_seconds() - start;
        }
        double seconds = gc_median(times, reps), algbw = (double)bytes / seconds / 1e9;
        if (env.rank == 0)
            printf("%lld,%.6g,%.4g,%.4g\n", (long long)bytes, seconds, algbw, algbw * 2.0 * (world - 1) / world);
        fflush(stdout);
        gc_tensor_release(t);
    }
    free(times);
    gc_process_group_free(group);
    return 0;
}
