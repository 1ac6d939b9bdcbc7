/* Checkpoints by wall time across processes (train/save_timer.h): saving is collective, so the
 * ranks must agree on when. Here their clocks disagree as far as they can -- rank 0's time is
 * up (1e-9 minutes), rank 1's is hours away -- and both are told a checkpoint is due; with
 * neither due, neither is. A rank that decided alone would save while its peer trained on, and
 * both would wait for each other until the group's timeout. */
#include "dist_spawn.h"
#include "train/save_timer.h"

static int agree_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_train_dist dist = {.group = dist_test_group(20)};
    gc_save_timer timer;
    gc_save_timer_start(&timer, rank == 0 ? 1e-9 : 600);
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL); /* past rank 0's 60 microseconds */
    bool due = false;
    CHECK_MSG(gc_save_timer_due(&timer, &dist, &due) == GC_OK, "rank %d: %s", rank, gc_last_error());
    CHECK_MSG(due, "rank %d: not due, though rank 0's time is up", rank);
    /* restarted, no rank's time is up */
    gc_save_timer_start(&timer, 600);
    CHECK_MSG(gc_save_timer_due(&timer, &dist, &due) == GC_OK && !due, "rank %d: due with nobody's time up", rank);
    gc_process_group_free(dist.group);
    return gc_test_result();
}

int main(void) {
    CHECK_MSG(dist_all_pass(2, agree_body, NULL, 60), "two ranks whose clocks disagree");
    return gc_test_result();
}
