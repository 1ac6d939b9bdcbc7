/* The CPU thread pool (see thread_pool.h).
 *
 * Each worker has a slot: the range it is to run and a sequence number the caller bumps to
 * post it. A worker waits for its number to change, spinning a little first (kernels come
 * in quick succession during a training step, and a condition variable's wake-up costs
 * tens of microseconds), then sleeping on the pool's condition variable. The caller runs
 * the first range itself and waits for the count of unfinished ranges to reach zero, the
 * same way. A slot is only written while its worker is idle: the previous call returned only
 * after every worker it used had finished. */
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
    atomic_uint posted; /* bumped by the caller for each range posted to this worker */
    gc_parallel_fn fn;  /* NULL posted: the worker ends (gc_thread_pool_stop) */
    void *ctx;
    int64_t begin, end;
} worker_slot;

static struct {
    pthread_mutex_t busy;       /* held by the thread running a parallel call */
    pthread_mutex_t sleep_lock; /* with `wake` and `done`: the sleeping side of the flags */
    pthread_cond_t wake, done;
    worker_slot slots[MAX_THREADS]; /* [0] unused: the caller runs the first range */
    int started;                    /* workers running: slots [1, started] */
    atomic_int threads;             /* ranges per call at most; 0 until first read */
    atomic_int unfinished;          /* ranges of the current call still running on workers */
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

/* Waits until *flag differs from `seen` (spinning, then sleeping); returns its new value. */
static unsigned wait_for_change(atomic_uint *flag, unsigned seen) {
    for (int poll = 0; poll < SPIN_POLLS; poll++) {
        unsigned now = atomic_load_explicit(flag, memory_order_acquire);
        if (now != seen) return now;
        cpu_relax();
    }
    pthread_mutex_lock(&pool.sleep_lock);
    unsigned now;
    while ((now = atomic_load_explicit(flag, memory_order_acquire)) == seen)
        pthread_cond_wait(&pool.wake, &pool.sleep_lock);
    pthread_mutex_unlock(&pool.sleep_lock);
    return now;
}

static void *worker_main(void *arg) {
    worker_slot *slot = arg;
    unsigned seen = 0;
    inside_range = true; /* everything a worker runs is inside a range */
    for (;;) {
        seen = wait_for_change(&slot->posted, seen);
        if (!slot->fn) return NULL;
        slot->fn(slot->ctx, slot->begin, slot->end);
        if (atomic_fetch_sub_explicit(&pool.unfinished, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.sleep_lock); /* the caller may be asleep on `done` */
            pthread_cond_broadcast(&pool.done);
            pthread_mutex_unlock(&pool.sleep_lock);
        }
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
    for (int i = 1; i <= pool.started; i++) {
        pool.slots[i].fn = NULL;
        atomic_fetch_add_explicit(&pool.slots[i].posted, 1, memory_order_release);
    }
    wake_workers();
    for (int i = 1; i <= pool.started; i++) {
        pthread_join(pool.slots[i].thread, NULL);
        atomic_store(&pool.slots[i].posted, 0); /* a new worker starts from 0 */
    }
    pool.started = 0;
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
    atomic_store_explicit(&pool.unfinished, parts - 1, memory_order_relaxed);
    for (int part = 1; part < parts; part++) {
        worker_slot *slot = &pool.slots[part];
        slot->fn = fn;
        slot->ctx = ctx;
        slot->begin = n * part / parts;
        slot->end = n * (part + 1) / parts;
        atomic_fetch_add_explicit(&slot->posted, 1, memory_order_release);
    }
    wake_workers();

    inside_range = true;
    fn(ctx, 0, n / parts);
    inside_range = false;

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
