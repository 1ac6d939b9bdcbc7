/* Timing helpers shared by the benchmarks. */
#ifndef GC_BENCH_UTIL_H
#define GC_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on a monotonic clock. */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts values[0..n) and returns the median (the upper one for an even n). */
static inline double bench_median(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, bench_compare_doubles);
    return values[n / 2];
}

#endif
