/* Distributed Gradient Cache over the TCP ring, in worlds of 2 and 4 processes forked by
 * this test (dist_cache_checks.h): equal and unequal rows per rank, hard negatives, tied
 * encoders, the kept last graph, the plain (full-batch) step, sync suppressed or not; the
 * loss gathered or around the ring, and the automatic choice between them. */
#include "dist_cache_checks.h"

int main(void) {
    dist_cache_run_all(GC_DIST_TCP, 4, true, 120); /* minutes under the sanitizers on a busy machine */
    return gc_test_result();
}
