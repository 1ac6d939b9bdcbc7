/* Timing helpers shared by the benchmarks (times come from the library's clock, gc_seconds). */
#ifndef GC_BENCH_UTIL_H
#define GC_BENCH_UTIL_H

#include <stdlib.h>

#include "gradcache/clock.h"

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
