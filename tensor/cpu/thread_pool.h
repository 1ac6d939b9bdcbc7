/* The CPU kernels' thread pool: threads started once, on the first parallel kernel, and
 * parked between kernels (a short spin, then a condition variable), so that a kernel costs
 * a wake-up, not a thread creation.
 *
 * gc_parallel_for(n, grain, fn, ctx) splits [0, n) into contiguous ranges of at least
 * `grain` items, one per thread, runs fn(ctx, begin, end) on each and returns when all are
 * done. The calling thread runs ranges too, every one no worker has started yet: a worker
 * the OS has not scheduled does not hold the call up (tests/test_thread_pool.c). So a range
 * may run on any thread, and several ranges on one, in any order. The split depends on the
 * thread count (never on who runs what), so a kernel must compute every output element the
 * same way whichever range holds it: then its results do not depend on the number of threads
 * (tests/test_threads.c checks each threaded kernel bitwise with 1, 2, 3 and 8 threads).
 *
 * A call from inside a range (a nested parallel kernel), or while another thread of the
 * program holds the pool, runs serially in the calling thread. A child process made by
 * fork() starts without workers and starts its own on first use; so does the program after
 * gc_thread_pool_stop(). */
#ifndef GC_TENSOR_THREAD_POOL_H
#define GC_TENSOR_THREAD_POOL_H

#include <stdint.h>

typedef void (*gc_parallel_fn)(void *ctx, int64_t begin, int64_t end);

/* Elements of a cheap elementwise kernel worth a thread: a few microseconds of work, well
 * above the cost of waking a parked worker. */
#define GC_GRAIN_ELEMENTS ((int64_t)1 << 14)

void gc_parallel_for(int64_t n, int64_t grain, gc_parallel_fn fn, void *ctx);

/* The number of ranges gc_parallel_for(n, grain, ...) would make now: at least 1. */
int gc_parallel_parts(int64_t n, int64_t grain);

/* Joins the workers (gc_shutdown); the next parallel call starts them again. Waits for a
 * call running in another thread; does nothing inside a range. */
void gc_thread_pool_stop(void);

#endif
