/* The library's one clock: seconds on the monotonic clock (CLOCK_MONOTONIC), from an
 * arbitrary start, for durations and deadlines (timeouts of collectives, step times, the
 * benchmarks), never for dates. */
#ifndef GRADCACHE_CLOCK_H
#define GRADCACHE_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

double gc_seconds(void);

#ifdef __cplusplus
}
#endif
#endif
