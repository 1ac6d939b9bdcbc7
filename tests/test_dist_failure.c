/* Failures become errors, never hangs: a rank killed mid-run, a rank that stops taking
 * part, the same two in the middle of a ring loss, a peer that never arrives, an unreachable
 * master, a port in use, ranks that disagree on the world size or on a shift's size, and
 * malformed environment variables. Timeouts are shortened to a few
 * seconds; each surviving rank checks its own error (GC_ERR_PEER, a message naming the
 * collective and a rank) and how long it took. */
#include <sys/time.h>
#include <time.h>

#include "check.h"
#include "dist_spawn.h"

#define TIMEOUT 2.0 /* seconds: the shortened collective timeout */
#define BROKEN_CALLS 20000 /* collectives on a broken group, each failing at once */

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* All-reduces until one fails; checks the failure (within `limit` seconds of `since`). */
static void run_until_failure(gc_process_group *group, double limit) {
    gc_tensor *t = gc_ones(GC_SHAPE(100000), GC_F32, gc_cpu());
    REQUIRE(t);
    gc_status status = GC_OK;
    double failed_at = 0, last_ok = seconds_now();
    for (int i = 0; i < 100000 && status == GC_OK; i++) {
        status = gc_dist_all_reduce(group, t, GC_DIST_AVG);
        if (status == GC_OK) last_ok = seconds_now();
    }
    failed_at = seconds_now();
    const char *message = gc_last_error();
    fprintf(stderr, "rank %d, after %.2f s: %s\n", gc_dist_rank(group), failed_at - last_ok, message);
    CHECK_MSG(status == GC_ERR_PEER, "rank %d: status %d", gc_dist_rank(group), (int)status);
    CHECK_MSG(strstr(message, "all_reduce #") && strstr(message, "rank "), "rank %d: message '%s'",
              gc_dist_rank(group), message);
    CHECK_MSG(failed_at - last_ok < limit, "rank %d: the failure took %.1f s to show: %s", gc_dist_rank(group),
              failed_at - last_ok, message);
    /* the group is broken now: the next collective fails at once */
    double again = seconds_now();
    CHECK(gc_dist_all_reduce(group, t, GC_DIST_SUM) == GC_ERR_PEER);
    CHECK(strstr(gc_last_error(), "failed earlier") != NULL);
    CHECK(seconds_now() - again < 0.5);
    /* and so do many in a row: the communication thread fails each one as the caller's thread
     * hands it over, a race in which the caller once freed works the thread still held (the
     * sanitizers' run sees a use after free) */
    int failed = 0;
    for (int i = 0; i < BROKEN_CALLS; i++) failed += gc_dist_all_reduce(group, t, GC_DIST_SUM) == GC_ERR_PEER;
    CHECK_MSG(failed == BROKEN_CALLS, "rank %d: %d of %d calls failed", gc_dist_rank(group), failed, BROKEN_CALLS);
    RELEASE(t);
}

/* Rank 2 of 3 dies (SIGKILL) after some collectives: the others learn it from the closed
 * connections, long before the timeout. */
static int killed_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(TIMEOUT * 5);
    if (rank == 2) {
        gc_tensor *t = gc_ones(GC_SHAPE(100000), GC_F32, gc_cpu());
        for (int i = 0; i < 20; i++) gc_dist_all_reduce(group, t, GC_DIST_AVG);
        raise(SIGKILL);
    }
    run_until_failure(group, TIMEOUT);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1 of 3 stops taking part (alive, silent): the others fail at the timeout. */
static int stuck_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(TIMEOUT);
    if (rank == 1) {
        sleep(4 * (unsigned)TIMEOUT);
        _exit(0); /* not freeing the group: a stuck process just ends */
    }
    run_until_failure(group, TIMEOUT + 1.5);
    gc_process_group_free(group);
    return gc_test_result();
}

/* The ring loss of 1500 rows a side per rank, until a call fails: the failure must be
 * GC_ERR_PEER naming a collective and a rank, within `limit` seconds more than the slowest
 * call that succeeded, and the group broken after it (the next call fails at once). */
static void ring_until_failure(gc_process_group *group, double limit) {
    int rank = gc_dist_rank(group);
    gc_tensor *q = gc_test_random(GC_SHAPE(1500, 16), GC_F32, 1 + (uint64_t)rank);
    gc_tensor *p = gc_test_random(GC_SHAPE(1500, 16), GC_F32, 9 + (uint64_t)rank);
    REQUIRE(q && p);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05, .symmetric = true};
    gc_status status = GC_OK;
    double slowest = 0, took = 0, value;
    for (int i = 0; i < 1000 && status == GC_OK; i++) {
        gc_tensor *gq = NULL, *gp = NULL;
        double start = seconds_now();
        status = gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp);
        took = seconds_now() - start;
        if (status == GC_OK && took > slowest) slowest = took;
        RELEASE(gq, gp);
    }
    fprintf(stderr, "rank %d, after %.2f s (the slowest call took %.2f s): %s\n", rank, took, slowest, gc_last_error());
    CHECK_MSG(status == GC_ERR_PEER && strstr(gc_last_error(), " #") && strstr(gc_last_error(), "rank "),
              "rank %d: status %d: %s", rank, (int)status, gc_last_error());
    CHECK_MSG(took < slowest + limit, "rank %d: the failure took %.1f s to show", rank, took);
    double again = seconds_now();
    gc_tensor *gq = NULL, *gp = NULL;
    CHECK(gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp) == GC_ERR_PEER && !gq && !gp);
    CHECK(strstr(gc_last_error(), "failed earlier") != NULL && seconds_now() - again < 0.5);
    RELEASE(q, p);
}

static void die(int signal) {
    (void)signal;
    raise(SIGKILL);
}

/* Alive and silent from the middle of whatever it was doing (the communication thread
 * finishes the transfers already started; nothing more comes), then gone. */
static void stall(int signal) {
    (void)signal;
    sleep(4 * (unsigned)TIMEOUT);
    _exit(0);
}

/* `rank` runs `handler` 0.3 s into its ring losses, in the middle of one; every rank loops
 * over ring losses until one fails. */
static int ring_failure_body(int rank, int victim, void (*handler)(int), double timeout, double limit) {
    gc_process_group *group = dist_test_group(timeout);
    if (rank == victim) {
        signal(SIGALRM, handler);
        struct itimerval soon = {.it_value = {0, 300 * 1000}};
        setitimer(ITIMER_REAL, &soon, NULL);
    }
    ring_until_failure(group, limit);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 2 of 3 is killed: the others learn it from the closed connections, long before the
 * timeout. */
static int killed_in_ring_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    return ring_failure_body(rank, 2, die, TIMEOUT * 5, TIMEOUT);
}

/* Rank 1 of 3 stalls: the others fail at the timeout. */
static int stuck_in_ring_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    return ring_failure_body(rank, 1, stall, TIMEOUT, TIMEOUT + 1.5);
}

/* Forming a group fails with GC_ERR_PEER or the given status, within the timeout plus a
 * margin, and the message holds `want`. */
static int expect_group_failure(gc_status expected, const char *want) {
    double start = seconds_now();
    gc_dist_options options = {.backend = GC_DIST_TCP, .timeout_seconds = TIMEOUT};
    gc_process_group *group = gc_process_group_from_env(&options);
    CHECK(group == NULL);
    fprintf(stderr, "rank %s, after %.2f s: %s\n", getenv("RANK"), seconds_now() - start, gc_last_error());
    CHECK_MSG(gc_last_status() == expected, "status %d: %s", (int)gc_last_status(), gc_last_error());
    CHECK_MSG(strstr(gc_last_error(), want) != NULL, "wanted '%s' in '%s'", want, gc_last_error());
    CHECK_MSG(seconds_now() - start < 3 * TIMEOUT + 2, "took %.1f s", seconds_now() - start);
    gc_process_group_free(group);
    return gc_test_result();
}

static int missing_peer_body(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    return expect_group_failure(GC_ERR_PEER, "rank 2"); /* ranks 0 and 1 of 3 only */
}

static int no_master_body(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    return expect_group_failure(GC_ERR_PEER, "cannot connect"); /* rank 1 of 2 alone */
}

static int port_in_use_body(int rank, int world, void *arg) {
    (void)rank, (void)world;
    char port[16];
    snprintf(port, sizeof port, "%d", *(int *)arg);
    setenv("MASTER_PORT", port, 1);
    return expect_group_failure(GC_ERR_IO, port);
}

static int world_mismatch_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    if (rank == 1) {
        setenv("WORLD_SIZE", "3", 1);
        return expect_group_failure(GC_ERR_FORMAT, "rank 1 has WORLD_SIZE 3 but rank 0 has 2");
    }
    return expect_group_failure(GC_ERR_PEER, "rank 1");
}

/* Rank 1 expects 8 bytes where rank 0 shifts it 16: rank 1's shift returns an error naming
 * both sizes (the size is the peer's word), and the next collective fails on either rank
 * instead of taking the bytes out of step. */
static int shift_sizes_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(TIMEOUT * 5);
    gc_tensor *send = gc_zeros(GC_SHAPE(4), GC_F32, gc_cpu());
    gc_tensor *receive = gc_empty(GC_SHAPE(rank ? 2 : 4), GC_F32, gc_cpu());
    gc_status status = gc_dist_shift(group, send, receive);
    if (rank == 1) {
        CHECK(status == GC_ERR_FORMAT);
        CHECK_MSG(strstr(gc_last_error(), "shift #0 ([4] f32 cpu): rank 0 sent 16 bytes, rank 1 expects 8"),
                  "rank 1 said: %s", gc_last_error());
    }
    CHECK(gc_dist_barrier(group) == GC_ERR_PEER);
    RELEASE(send, receive);
    gc_process_group_free(group);
    return gc_test_result();
}

static void check_shift_sizes(void) { CHECK_MSG(dist_all_pass(2, shift_sizes_body, NULL, 30), "sizes differ"); }

/* Runs `body` in the listed ranks of `world` and checks that each exited 0 (but `killed`,
 * which must have died of SIGKILL; -1 for none). */
static void run_case(const char *name, int world, const int *ranks, int n_ranks, dist_body body, void *arg,
                     int killed) {
    int status[DIST_SPAWN_MAX];
    double elapsed;
    bool in_time = dist_run(world, ranks, n_ranks, body, arg, 30, status, &elapsed);
    CHECK_MSG(in_time, "%s: processes still running after 30 s", name);
    for (int i = 0; i < n_ranks; i++)
        CHECK_MSG(status[i] == (ranks[i] == killed ? 128 + SIGKILL : 0), "%s: rank %d exited with %d", name, ranks[i],
                  status[i]);
}

static void check_env(void) {
    struct {
        const char *world, *rank, *addr, *port, *want;
    } cases[] = {
        {"0", "0", "127.0.0.1", "29500", "WORLD_SIZE='0'"},
        {"2", "2", "127.0.0.1", "29500", "RANK='2'"},
        {"2", "-1", "127.0.0.1", "29500", "RANK='-1'"},
        {"2", "x", "127.0.0.1", "29500", "RANK='x'"},
        {"2", NULL, "127.0.0.1", "29500", "RANK is not"},
        {"2", "0", NULL, "29500", "MASTER_ADDR"},
        {"2", "0", "127.0.0.1", "70000", "MASTER_PORT='70000'"},
        {"2", "0", "127.0.0.1", NULL, "MASTER_PORT"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setenv("WORLD_SIZE", cases[i].world, 1);
        unsetenv("LOCAL_RANK");
        unsetenv("LOCAL_WORLD_SIZE");
        if (cases[i].rank) setenv("RANK", cases[i].rank, 1); else unsetenv("RANK");
        if (cases[i].addr) setenv("MASTER_ADDR", cases[i].addr, 1); else unsetenv("MASTER_ADDR");
        if (cases[i].port) setenv("MASTER_PORT", cases[i].port, 1); else unsetenv("MASTER_PORT");
        gc_dist_env env;
        CHECK(gc_dist_env_read(&env) == GC_ERR_FORMAT);
        CHECK_MSG(strstr(gc_last_error(), cases[i].want) != NULL, "wanted '%s' in '%s'", cases[i].want,
                  gc_last_error());
    }
    dist_forget_launchers();
    gc_dist_env env;
    CHECK(gc_dist_env_read(&env) == GC_OK && !env.launched && env.world_size == 1 && env.rank == 0);
    setenv("GC_DIST_TIMEOUT", "soon", 1);
    CHECK(gc_dist_default_timeout() < 0 && strstr(gc_last_error(), "GC_DIST_TIMEOUT"));
    setenv("GC_DIST_TIMEOUT", "2.5", 1);
    CHECK(gc_dist_default_timeout() == 2.5);
    unsetenv("GC_DIST_TIMEOUT");
    CHECK(gc_dist_default_timeout() == 600);
}

/* A port some other program listens on. */
static int listening_port(int *fd) {
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t size = sizeof addr;
    REQUIRE(*fd >= 0 && bind(*fd, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(*fd, 1) == 0 &&
            getsockname(*fd, (struct sockaddr *)&addr, &size) == 0);
    return ntohs(addr.sin_port);
}

int main(void) {
    check_env();
    int all3[] = {0, 1, 2}, first_two[] = {0, 1}, second[] = {1}, first[] = {0};
    run_case("a rank killed", 3, all3, 3, killed_body, NULL, 2);
    run_case("a rank stuck", 3, all3, 3, stuck_body, NULL, -1);
    run_case("a rank killed in a ring loss", 3, all3, 3, killed_in_ring_body, NULL, 2);
    run_case("a rank stuck in a ring loss", 3, all3, 3, stuck_in_ring_body, NULL, -1);
    run_case("a peer that never arrives", 3, first_two, 2, missing_peer_body, NULL, -1);
    run_case("no master", 2, second, 1, no_master_body, NULL, -1);
    int busy_fd, busy = listening_port(&busy_fd);
    run_case("port in use", 2, first, 1, port_in_use_body, &busy, -1);
    close(busy_fd);
    run_case("world sizes differ", 2, first_two, 2, world_mismatch_body, NULL, -1);
    check_shift_sizes();
    return gc_test_result();
}
