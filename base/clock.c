/* The library's one clock (include/gradcache/clock.h). */
#include <time.h>

#include "gradcache/clock.h"

double gc_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}
