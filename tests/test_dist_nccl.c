/* The NCCL backend on a GPU (skipped without one): the collective checks and distributed
 * Gradient Cache of the TCP tests, through NCCL on CUDA tensors; CUDA tensors through the
 * TCP ring (staged through the host); and the TCP ring's result equal to NCCL's.
 *
 * Two ranks need two GPUs, or one GPU shared by both ranks, which NCCL allows from 2.30 on
 * with NCCL_MULTI_RANK_GPU_ENABLE=1 (build with -Dnccl-root pointing at such an NCCL, e.g.
 * the PyPI wheel nvidia-nccl-cu13; see README "Using a GPU"). Without that, only the world
 * of one process runs, and the test says so. */
#include "dist_cache_checks.h"
#include "dist_collective_checks.h"
#include "gradcache/config.h"
#if GC_HAVE_NCCL
#include <nccl.h>
#endif

/* Each rank on its own GPU when there are enough, else all on cuda:0 (a rank may ask: it is
 * a process of its own, forked before anything touched CUDA). */
static gc_device rank_device(int rank) { return gc_cuda(rank % gc_cuda_device_count()); }

static int collectives_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_device device = rank_device(rank);
    /* the TCP ring's result first (on CUDA tensors, staged through the host) ... */
    gc_process_group *tcp = dist_test_group(60);
    check_collectives(tcp, device);
    gc_tensor *ring = check_rounding_sums(tcp, device);
    gc_process_group_free(tcp);
    /* ... then NCCL's, which must equal it to the rounding of another order of addition */
    gc_process_group *nccl = gc_process_group_from_env(&(gc_dist_options){GC_DIST_NCCL, 60, device});
    REQUIRE(nccl);
    CHECK(gc_dist_backend_of(nccl) == GC_DIST_NCCL);
    check_collectives(nccl, device);
    gc_tensor *theirs = check_rounding_sums(nccl, device);
    const float *a = gc_data(ring), *b = gc_data(theirs);
    int64_t differ = 0;
    for (int64_t i = 0; i < gc_numel(ring); i++) differ += fabsf(a[i] - b[i]) > 4 * ldexpf(fabsf(a[i]) + 1, -23);
    CHECK_MSG(differ == 0, "%lld sums of the ring and of NCCL differ beyond rounding", (long long)differ);
    RELEASE(ring, theirs);
    gc_process_group_free(nccl);
    return gc_test_result();
}

int main(void) {
    /* this process forks the ranks, so it never touches CUDA itself (tests/dist_spawn.h) */
    int devices = gc_test_require_cuda_untouched();
    int worlds = 2, version = 0;
#if GC_HAVE_NCCL
    ncclGetVersion(&version);
#else
    fprintf(stderr, "skip: this build has no NCCL\n");
    return GC_TEST_SKIP;
#endif
    const char *shared = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    if (devices < 2 && (version < 23000 || !shared || strcmp(shared, "1") != 0)) {
        fprintf(stderr, "NCCL %d with one GPU: two ranks need NCCL >= 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1; "
                        "running the world of one process only\n", version);
        worlds = 1;
    }
    /* 10 runs of at most 12 s: inside the test's own limit of 120 s (tests/meson.build), so
     * that a run that hangs is reported by name */
    for (int world = 1; world <= worlds; world++)
        CHECK_MSG(dist_all_pass(world, collectives_body, NULL, 12), "collectives, world %d", world);
    if (worlds > 1) dist_cache_run_all(GC_DIST_NCCL, 2, 12);
    return gc_test_result();
}
