/* What the benchmarks share: the library's clock (gc_seconds) and median (gc_median), one home
 * each for every measurement of the project. */
#ifndef GC_BENCH_UTIL_H
#define GC_BENCH_UTIL_H

#include "gradcache/clock.h"
#include "gradcache/measure.h"

#endif
