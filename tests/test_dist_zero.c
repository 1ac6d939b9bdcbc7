/* ZeRO on the TCP ring (dist_zero_checks.h says what is checked). */
#include "dist_zero_checks.h"

int main(void) {
    dist_zero_run_all(GC_DIST_TCP, 4, 120);
    return gc_test_result();
}
