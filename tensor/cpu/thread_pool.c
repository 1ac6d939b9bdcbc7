/* The CPU thread pool (see thread_pool.h).
 *
 * A call splits [0, n) into `parts` ranges fixed by n and the thread count, and opens them to
 * be claimed: `ticket` holds the count and the index of the next unclaimed range, and whoever
 * advances it (a compare-and-swap) runs that range. The caller posts the call to the workers
 * it wants (a sequence number per worker, bumped) and then claims ranges itself like any of
 * them, so that a worker the OS has not scheduled yet costs nothing: the caller runs its
 * ranges (on a loaded machine, half the samples of a profile were callers waiting for such a
 * worker). Only a range already claimed is waited for, through the count of unfinished ones.
 * Who runs a range never changes what it computes.
 *
 * A worker waits for its number to change, spinning a little first (kernels come in quick
 * succession during a training step, and a condition variable's wake-up costs tens of
 * microseconds), then sleeping on the pool's condition variable; the caller takes the lock to
 * wake them only when one sleeps. A worker late for a call (it saw its post after the
 * ranges were gone) finds the ticket spent and waits again. The call's fields are written
 * while no range is open and read only by a thread that claimed a range of that call, which
 * the caller waits for before it returns. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "gradcache/device.h"
#include "gradcache/error.h"
#include "thread_pool.h"

#define MAX_THREADS 64
/* Polls of a flag before sleeping on the condition variable: some tens of microseconds,
 * longer than the gap between two kernels of a training step. */
#define SPIN_POLLS 4000

typedef struct worker_slot {
    pthread_t thread;
    atomic_uint posted; /* bumped by the caller for each call it wants this worker in */
} worker_slot;

static struct {
    pthread_mutex_t busy;       /* held by the thread running a parallel call */
    pthread_mutex_t sleep_lock; /* with `wake` and `done`: the sleeping side of the flags */
    pthread_cond_t wake, done;
    worker_slot slots[MAX_THREADS]; /* [0] unused: the caller */
    int started;                    /* workers running: slots [1, started] */
    atomic_int threads;             /* ranges per call at most; 0 until first read */
    atomic_int sleepers;            /* workers asleep on `wake`, or about to be */
    atomic_bool stopping;           /* posted with it, the workers end (gc_thread_pool_stop) */
    /* the current call: ranges [n * i / parts, n * (i + 1) / parts) of fn */
    gc_parallel_fn fn;
    void *ctx;
    int64_t n;
    int parts;
    atomic_uint_fast64_t ticket; /* parts << 32 | the next range to claim: spent at next == parts */
    atomic_int unfinished;       /* ranges of the current call not yet run to their end */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER,
          .sleep_lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Set in a thread while it runs a range: a nested call runs serially. */
static _Thread_local bool inside_range;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* GC_NUM_THREADS, or the number of online CPUs; at most MAX_THREADS. */
static int default_threads(void) {
    const char *text = getenv("GC_NUM_THREADS");
    if (text && *text) {
        char *end;
        long value = strtol(text, &end, 10);
        if (*end || value < 1) gc_fatal("cpu threads: GC_NUM_THREADS=%s is not a positive integer", text);
        return value < MAX_THREADS ? (int)value : MAX_THREADS;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : online < MAX_THREADS ? (int)online : MAX_THREADS;
}

/* Waits until *flag differs from `seen` (spinning, then sleeping); returns its new value.
 * Asleep, the worker is counted in `sleepers` before it looks at the flag a last time, and
 * the caller bumps the flag before it reads `sleepers` (both sequentially consistent): so
 * either the worker sees the bump or the caller sees a sleeper and wakes it. */
static unsigned wait_for_change(atomic_uint *flag, unsigned seen) {
    for (int poll = 0; poll < SPIN_POLLS; poll++) {
        unsigned now = atomic_load_explicit(flag, memory_order_acquire);
        if (now != seen) return now;
        cpu_relax();
    }
    pthread_mutex_lock(&pool.sleep_lock);
    atomic_fetch_add(&pool.sleepers, 1);
    unsigned now;
    while ((now = atomic_load(flag)) == seen) pthread_cond_wait(&pool.wake, &pool.sleep_lock);
    atomic_fetch_sub(&pool.sleepers, 1);
    pthread_mutex_unlock(&pool.sleep_lock);
    return now;
}

/* The index of the next unclaimed range of the open call, now this thread's; -1 when none is
 * left. A successful exchange reads the ticket the caller released after writing the call. */
static int claim_range(void) {
    uint_fast64_t ticket = atomic_load_explicit(&pool.ticket, memory_order_relaxed);
    for (;;) {
        uint32_t parts = (uint32_t)(ticket >> 32), next = (uint32_t)ticket;
        if (next >= parts) return -1;
        if (atomic_compare_exchange_weak_explicit(&pool.ticket, &ticket, ticket + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return (int)next;
    }
}

/* Runs ranges of the open call until none is left to claim. A worker that finishes the last
 * range wakes the caller, which may be asleep on `done`. */
static void run_ranges(bool worker) {
    for (int part; (part = claim_range()) >= 0;) {
        int64_t n = pool.n, parts = pool.parts;
        pool.fn(pool.ctx, n * part / parts, n * (part + 1) / parts);
        if (atomic_fetch_sub_explicit(&pool.unfinished, 1, memory_order_acq_rel) == 1 && worker) {
            pthread_mutex_lock(&pool.sleep_lock);
            pthread_cond_broadcast(&pool.done);
            pthread_mutex_unlock(&pool.sleep_lock);
        }
    }
}

static void *worker_main(void *arg) {
    worker_slot *slot = arg;
    unsigned seen = 0;
    inside_range = true; /* everything a worker runs is inside a range */
    for (;;) {
        seen = wait_for_change(&slot->posted, seen);
        if (atomic_load_explicit(&pool.stopping, memory_order_acquire)) return NULL;
        run_ranges(true);
    }
    return NULL;
}

/* A child of fork() has none of the parent's workers: it starts its own when it needs them. */
static void forget_workers_after_fork(void) {
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.sleep_lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    for (int i = 1; i <= pool.started; i++) atomic_store(&pool.slots[i].posted, 0);
    pool.started = 0;
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.ticket, 0);
    atomic_store(&pool.unfinished, 0);
}

/* Wakes the sleeping workers after posts: they re-check their flags under the lock, so none
 * misses its post. */
static void wake_workers(void) {
    pthread_mutex_lock(&pool.sleep_lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.sleep_lock);
}

void gc_thread_pool_stop(void) {
    if (inside_range) return; /* the caller's own parallel call holds the pool */
    pthread_mutex_lock(&pool.busy);
    atomic_store_explicit(&pool.stopping, true, memory_order_release);
    for (int i = 1; i <= pool.started; i++) atomic_fetch_add(&pool.slots[i].posted, 1);
    wake_workers();
    for (int i = 1; i <= pool.started; i++) {
        pthread_join(pool.slots[i].thread, NULL);
        atomic_store(&pool.slots[i].posted, 0); /* a new worker starts from 0 */
    }
    pool.started = 0;
    atomic_store(&pool.stopping, false);
    pthread_mutex_unlock(&pool.busy);
}

/* Starts workers up to `wanted` - 1 (called holding `busy`); returns how many run. A thread
 * that cannot be created leaves its ranges to the others. */
static int start_workers(int wanted) {
    static bool fork_handler_installed;
    if (!fork_handler_installed) fork_handler_installed = pthread_atfork(NULL, NULL, forget_workers_after_fork) == 0;
    while (pool.started + 1 < wanted) {
        worker_slot *slot = &pool.slots[pool.started + 1];
        if (pthread_create(&slot->thread, NULL, worker_main, slot) != 0) break;
        pool.started++;
    }
    return pool.started;
}

int gc_cpu_threads(void) {
    int threads = atomic_load(&pool.threads);
    if (threads) return threads;
    int unset = 0;
    atomic_compare_exchange_strong(&pool.threads, &unset, default_threads());
    return atomic_load(&pool.threads);
}

void gc_set_cpu_threads(int threads) {
    if (threads < 1) gc_fatal("set_cpu_threads: %d threads (needs at least 1)", threads);
    atomic_store(&pool.threads, threads < MAX_THREADS ? threads : MAX_THREADS);
}

static int parts_for(int64_t n, int64_t grain, int threads) {
    if (grain < 1) grain = 1;
    int64_t by_size = n / grain;
    return by_size < 1 ? 1 : by_size < threads ? (int)by_size : threads;
}

int gc_parallel_parts(int64_t n, int64_t grain) {
    if (inside_range) return 1;
    return parts_for(n, grain, gc_cpu_threads());
}

void gc_parallel_for(int64_t n, int64_t grain, gc_parallel_fn fn, void *ctx) {
    if (n <= 0) return;
    if (inside_range || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n); /* nested, or another thread of the program is using the pool */
        return;
    }
    int parts = parts_for(n, grain, gc_cpu_threads());
    if (parts > 1) parts = 1 + start_workers(parts) < parts ? 1 + pool.started : parts;
    if (parts == 1) {
        pthread_mutex_unlock(&pool.busy);
        inside_range = true;
        fn(ctx, 0, n);
        inside_range = false;
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.parts = parts;
    atomic_store_explicit(&pool.unfinished, parts, memory_order_relaxed);
    atomic_store_explicit(&pool.ticket, (uint_fast64_t)parts << 32, memory_order_release); /* open */
    for (int worker = 1; worker < parts; worker++) atomic_fetch_add(&pool.slots[worker].posted, 1);
    if (atomic_load(&pool.sleepers) > 0) wake_workers();

    inside_range = true;
    run_ranges(false);
    inside_range = false;

    /* what is left was claimed by workers: wait for their ends */
    int poll = 0;
    while (atomic_load_explicit(&pool.unfinished, memory_order_acquire) > 0 && poll++ < SPIN_POLLS) cpu_relax();
    if (atomic_load_explicit(&pool.unfinished, memory_order_acquire) > 0) {
        pthread_mutex_lock(&pool.sleep_lock);
        while (atomic_load_explicit(&pool.unfinished, memory_order_acquire) > 0)
            pthread_cond_wait(&pool.done, &pool.sleep_lock);
        pthread_mutex_unlock(&pool.sleep_lock);
    }
    pthread_mutex_unlock(&pool.busy);
}
