/* The NCCL backend on a GPU (skipped without one): the collective checks (unequal counts and
 * shifts included), distributed Gradient Cache (the bucketer's sync suppression, the ring loss,
 * each step against one process's full batch), the ring loss's checks and ZeRO 1/2/2b (its
 * stages against the unsharded run, to NCCL's tolerance) of the TCP tests, through NCCL on CUDA
 * tensors; CUDA tensors through the TCP ring (staged through the host); the TCP ring's result
 * equal to NCCL's: its sums, and the parameters after each Gradient Cache scenario and each
 * ZeRO case, run through the TCP ring just before (dist_versus_tcp.h); and a peer that leaves
 * during an all-gather of unequal rows (padded buffers in flight).
 *
 * Two ranks need two GPUs, or one GPU shared by both ranks, which NCCL allows from 2.30 on
 * with NCCL_MULTI_RANK_GPU_ENABLE=1 (build with -Dnccl-root pointing at such an NCCL: the one
 * bench/build_nccl.sh builds, which bench/gpu_check.sh unpacks, or the PyPI wheel
 * nvidia-nccl-cu13; see README "Using a GPU"). Without that, only the world
 * of one process runs, and the test says so. */
#include "dist_cache_checks.h"
#include "dist_collective_checks.h"
#include "dist_ring_loss_checks.h"
#include "dist_zero_checks.h"
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

/* The ring contrastive loss through NCCL (ncclSend and ncclRecv for its shifts) against the
 * all-gather loss through NCCL and one process on the CPU: every case of
 * dist_ring_loss_checks.h. */
static int ring_loss_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_device device = rank_device(rank);
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_NCCL, 60, device});
    REQUIRE(group);
    check_ring_loss(group, device);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1 leaves after one all-gather of unequal rows; rank 0's next one, through padded
 * buffers, fails with GC_ERR_PEER within its timeout of 2 s, and the padded buffers go back to
 * the allocator only once the communication stream has drained (copies queued behind the
 * aborted collective could still write them): after the group is freed nothing of it is
 * live, and the device goes on working. */
static int peer_gone_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_device device = rank_device(rank);
    const int64_t counts[2] = {3, 5};
    gc_tensor *input = gc_full(GC_SHAPE(counts[rank], 4), GC_F32, device, rank + 1);
    gc_tensor *output = gc_empty(GC_SHAPE(8, 4), GC_F32, device);
    REQUIRE(input && output);
    size_t live_before = gc_memory_get_stats(device).live_bytes;
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_NCCL, 2, device});
    REQUIRE(group);
    CHECK_MSG(gc_dist_work_wait(gc_dist_all_gather_start(group, input, output, counts)) == GC_OK, "%s",
              gc_last_error());
    if (rank == 0) {
        gc_status status = gc_dist_work_wait(gc_dist_all_gather_start(group, input, output, counts));
        CHECK_MSG(status == GC_ERR_PEER && strstr(gc_last_error(), "all_gather"), "status %d: %s", (int)status,
                  gc_last_error());
    }
    gc_process_group_free(group);
    CHECK_MSG(gc_memory_get_stats(device).live_bytes == live_before, "rank %d: %zu bytes live, %zu before the group",
              rank, gc_memory_get_stats(device).live_bytes, live_before);
    gc_tensor *sum = gc_sum_all(input);
    CHECK(sum && gc_item(sum) == 4.0 * (double)counts[rank] * (rank + 1));
    RELEASE(input, output, sum);
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
    /* 32 runs through NCCL and 28 through the TCP ring (on the CPU, for the comparison), of at
     * most 10 s each, so that a run that hangs is reported by name while the runs before it take
     * their usual seconds (the limits add up to more than the test's own, tests/meson.build,
     * which bench/gpu_check.sh's nccl part needs to fit one call) */
    for (int world = 1; world <= worlds; world++)
        CHECK_MSG(dist_all_pass(world, collectives_body, NULL, 10), "collectives, world %d", world);
    if (worlds > 1) {
        dist_cache_run_all(GC_DIST_NCCL, 2, true, 10);
        CHECK_MSG(dist_all_pass(2, ring_loss_body, NULL, 10), "the ring loss through NCCL");
        dist_zero_run_all(GC_DIST_NCCL, 2, 10);
        CHECK_MSG(dist_all_pass(2, peer_gone_body, NULL, 10), "a peer gone during an all-gather of unequal rows");
    }
    return gc_test_result();
}
