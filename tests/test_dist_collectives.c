/* Collectives of the TCP ring against sequential references (dist_collective_checks.h), in
 * worlds of 1 to 4 processes forked from this test: every reduce op and dtype, sizes that
 * the world size does not divide, fewer elements than ranks, one element, sizes spanning
 * many pipelined segments, reduce-scatter and all-gather with unequal rows per rank (zero
 * included), in place or not, broadcast from every root, asynchronous works waited out of
 * order; the ring's all-reduce is bitwise its reduce-scatter then its all-gather, and each
 * rank sends the ring's bytes. */
#include "dist_collective_checks.h"

/* The ring's all-reduce is its reduce-scatter followed by its all-gather, chunk for chunk: a
 * reduce-scatter over the all-reduce's chunks (the even split) gives each rank its chunk of
 * the all-reduce's result bit for bit, on sums that round (what ZeRO's sharded step relies
 * on to reproduce the unsharded one). The bytes each rank sends are the ring's: every chunk
 * but its own in the reduce-scatter, every chunk but the next rank's in the all-gather. */
static void check_ring_phases(gc_process_group *group) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    const int64_t n = 100003;
    gc_tensor *whole = gc_empty(GC_SHAPE(n), GC_F32, gc_cpu());
    REQUIRE(whole);
    float *x = gc_data(whole);
    for (int64_t i = 0; i < n; i++) x[i] = (float)sin(0.001 * (double)i * (rank + 1) + rank);
    gc_tensor *sharded = gc_clone(whole);
    int64_t counts[DIST_SPAWN_MAX], start = 0;
    for (int r = 0; r < world; r++) counts[r] = n / world + (r < n % world);
    for (int r = 0; r < rank; r++) start += counts[r];
    gc_dist_stats before = gc_dist_get_stats(group);
    CHECK(gc_dist_all_reduce(group, whole, GC_DIST_AVG) == GC_OK);
    int64_t next = counts[(rank + 1) % world], sent = gc_dist_get_stats(group).sent_bytes - before.sent_bytes;
    CHECK_MSG(sent == (world > 1 ? (2 * n - counts[rank] - next) * 4 : 0), "all_reduce: rank %d sent %lld bytes",
              rank, (long long)sent);
    gc_tensor *mine = gc_slice0(sharded, start, start + counts[rank]), *theirs = gc_slice0(whole, start, start + counts[rank]);
    CHECK(gc_dist_reduce_scatter(group, sharded, mine, NULL, GC_DIST_AVG) == GC_OK);
    CHECK_MSG(memcmp(gc_data(mine), gc_data(theirs), gc_nbytes(mine)) == 0,
              "rank %d: the reduce-scatter's chunk is not the all-reduce's, bit for bit", rank);
    RELEASE(whole, sharded, mine, theirs);
}

static int body(int rank, int world, void *arg) {
    (void)arg;
    gc_process_group *group = dist_test_group(60);
    CHECK(gc_dist_rank(group) == rank && gc_dist_world_size(group) == world);
    CHECK(gc_dist_backend_of(group) == GC_DIST_TCP);
    check_collectives(group, gc_cpu());
    check_ring_phases(group);
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    for (int world = 1; world <= 4; world++) CHECK_MSG(dist_all_pass(world, body, NULL, 240), "world %d", world);
    return gc_test_result();
}
