/* Collectives of the TCP ring against sequential references (dist_collective_checks.h), in
 * worlds of 1 to 4 processes forked from this test: every reduce op and dtype, sizes that
 * the world size does not divide, fewer elements than ranks, one element, sizes spanning
 * many pipelined segments, reduce-scatter and all-gather with unequal rows per rank (zero
 * included), broadcast from every root, asynchronous works waited out of order. */
#include "dist_collective_checks.h"

static int body(int rank, int world, void *arg) {
    (void)arg;
    gc_process_group *group = dist_test_group(60);
    CHECK(gc_dist_rank(group) == rank && gc_dist_world_size(group) == world);
    CHECK(gc_dist_backend_of(group) == GC_DIST_TCP);
    check_collectives(group, gc_cpu());
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    for (int world = 1; world <= 4; world++) CHECK_MSG(dist_all_pass(world, body, NULL, 240), "world %d", world);
    return gc_test_result();
}
