/* The thread pool's caller runs every range no worker has started (tensor/cpu/thread_pool.h):
 * with its one worker held in a signal handler, as if the OS had set it aside on a loaded
 * machine, a 2-thread gc_parallel_for still finishes, each item run once, all by the caller;
 * released, the worker takes part in calls again. An alarm ends the test should a call wait
 * for the held worker. */
#define _DEFAULT_SOURCE /* syscall: gettid and tgkill name one thread */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "tensor/cpu/thread_pool.h"

#define ITEMS 1000
/* Seconds a call may take before the test counts it as waiting for the held worker. */
#define TIMEOUT_SECONDS 30

static pid_t thread_id(void) { return (pid_t)syscall(SYS_gettid); }

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000}, NULL); }

/* ---- a call whose two ranges meet: each waits (up to 10 s) until both have started, so the
 * worker runs one of them; the threads that ran ranges are recorded ---- */
typedef struct meeting {
    atomic_int started;
    atomic_int thread[2]; /* the thread id of each range */
} meeting;

static void meet(void *ctx, int64_t begin, int64_t end) {
    meeting *m = ctx;
    (void)end;
    atomic_store(&m->thread[begin == 0 ? 0 : 1], thread_id());
    atomic_fetch_add(&m->started, 1);
    for (int wait = 0; atomic_load(&m->started) < 2 && wait < 10000; wait++) sleep_ms(1);
}

/* The worker's thread id, from a call in which it ran a range; 0 if it never did. */
static pid_t worker_in_a_call(void) {
    meeting m = {0};
    gc_parallel_for(2, 1, meet, &m);
    pid_t caller = thread_id(), a = (pid_t)atomic_load(&m.thread[0]), b = (pid_t)atomic_load(&m.thread[1]);
    return atomic_load(&m.started) == 2 && a != b ? (a == caller ? b : a) : 0;
}

/* Whether thread `id` of this process is asleep (state S in /proc: a futex wait). The worker
 * asleep waits on the pool's condition variable, having let go of its lock: held then, it
 * cannot keep the caller from the lock. */
static bool asleep(pid_t id) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)id);
    FILE *file = fopen(path, "r");
    if (!file) return false;
    bool read = fgets(line, sizeof line, file) != NULL;
    fclose(file);
    const char *name_end = read ? strrchr(line, ')') : NULL; /* "id (name) S ..." */
    return name_end && name_end[1] == ' ' && name_end[2] == 'S';
}

/* ---- the worker held: SIGUSR1 parks it in the handler until `release` ---- */
static atomic_bool held, release;

static void hold(int signal) {
    (void)signal;
    atomic_store(&held, true);
    while (!atomic_load(&release)) nanosleep(&(struct timespec){0, 1000000}, NULL);
    atomic_store(&held, false);
}

/* Each item records the thread that ran it and counts its runs. */
typedef struct coverage {
    atomic_int runs[ITEMS];
    atomic_int thread[ITEMS];
} coverage;

static void cover(void *ctx, int64_t begin, int64_t end) {
    coverage *c = ctx;
    for (int64_t i = begin; i < end; i++) {
        atomic_fetch_add(&c->runs[i], 1);
        atomic_store(&c->thread[i], thread_id());
    }
}

static void test_caller_runs_what_a_held_worker_has_not_started(void) {
    gc_set_cpu_threads(2);
    pid_t worker = worker_in_a_call();
    CHECK_MSG(worker != 0, "no call had a range run by the worker");
    if (!worker) return;
    REQUIRE(signal(SIGUSR1, hold) != SIG_ERR);
    for (int wait = 0; !asleep(worker) && wait < 10000; wait++) sleep_ms(1); /* past its spinning */
    CHECK_MSG(asleep(worker), "the worker is not asleep between calls");
    REQUIRE(syscall(SYS_tgkill, getpid(), worker, SIGUSR1) == 0);
    for (int wait = 0; !atomic_load(&held) && wait < 10000; wait++) sleep_ms(1);
    CHECK_MSG(atomic_load(&held), "the worker did not take the signal");
    if (!atomic_load(&held)) return;

    static coverage c;
    alarm(TIMEOUT_SECONDS); /* its default action ends the process: a call that waits fails */
    gc_parallel_for(ITEMS, 1, cover, &c);
    alarm(0);
    int once = 0, by_caller = 0;
    for (int i = 0; i < ITEMS; i++) {
        once += atomic_load(&c.runs[i]) == 1;
        by_caller += atomic_load(&c.thread[i]) == thread_id();
    }
    CHECK_MSG(once == ITEMS, "%d of %d items ran exactly once", once, ITEMS);
    CHECK_MSG(by_caller == ITEMS, "%d of %d items ran on the caller while the worker was held", by_caller, ITEMS);

    atomic_store(&release, true);
    for (int wait = 0; atomic_load(&held) && wait < 10000; wait++) sleep_ms(1);
    CHECK_MSG(!atomic_load(&held), "the worker did not leave the handler");
    CHECK_MSG(worker_in_a_call() == worker, "the released worker ran no range of a later call");
}

int main(void) {
    test_caller_runs_what_a_held_worker_has_not_started();
    return gc_test_result();
}
