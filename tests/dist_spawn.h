/* Runs a test body in `world` processes forked from the test, with the environment a
 * launcher gives (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
 * on a free loopback port, and the run's secret DIST_TEST_SECRET in GC_DIST_SECRET), so that
 * a multi-process test is one program. Each process's
 * exit status is the body's return value (or the harness's 99 on a setup error); the parent
 * gives every process `seconds` in all, then kills what is left: no test can hang and none
 * leaves a process behind.
 *
 * The fork rule: CUDA does not survive fork(), so the test process itself never asks for
 * CUDA devices (it counts them in a probe child: gc_test_require_cuda_untouched); only its
 * ranks do. A test that breaks the rule fails, on any machine: dist_run refuses to fork,
 * and a test that asked and then exits (to skip, say, where there is no GPU) has its exit
 * status turned into a failure. */
#ifndef GC_TESTS_DIST_SPAWN_H
#define GC_TESTS_DIST_SPAWN_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define DIST_SPAWN_MAX 16
/* the run's secret in the tests' runs (gradcache launch makes a random one) */
#define DIST_TEST_SECRET "a secret of the tests' runs, 32 bytes or more"

typedef int (*dist_body)(int rank, int world, void *arg);

/* The fork rule (above), checked when the test process exits: its ranks are other
 * processes, which may use CUDA. */
static pid_t dist_test_process;

static void dist_check_fork_rule(void) {
    if (getpid() != dist_test_process || !gc_cuda_asked()) return;
    fprintf(stderr, "fork rule broken: this multi-process test asked for CUDA devices in its own process (CUDA "
                    "does not survive fork: count them in a probe child, gc_test_require_cuda_untouched)\n");
    _exit(GC_TEST_FAIL);
}

__attribute__((constructor)) static void dist_register_fork_rule(void) {
    dist_test_process = getpid();
    atexit(dist_check_fork_rule);
}

/* A loopback port nothing listens on right now. */
static inline int dist_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t size = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &size) != 0) {
        fprintf(stderr, "dist_spawn: no free port\n");
        exit(GC_TEST_SETUP_ERROR);
    }
    close(fd);
    return ntohs(addr.sin_port);
}

/* Unsets every variable by which gc_dist_env_read recognises a launcher (and the master's), so
 * that a test's own settings are all there is, even when the tests themselves run under srun
 * or mpirun. */
static inline void dist_forget_launchers(void) {
    static const char *const names[] = {
        "WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GC_DIST_SECRET",
        "GC_DIST_SECRET_FILE", "GC_DIST_BIND", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS",
        "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_NNODES", "SLURM_NODEID",
        "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_STEP_NODELIST",
        "SLURM_JOB_NODELIST", "SLURM_JOB_ID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unsetenv(names[i]);
}

static inline void dist_set_env(int rank, int world, int port) {
    char text[32];
    snprintf(text, sizeof text, "%d", rank);
    setenv("RANK", text, 1);
    setenv("LOCAL_RANK", text, 1);
    snprintf(text, sizeof text, "%d", world);
    setenv("WORLD_SIZE", text, 1);
    setenv("LOCAL_WORLD_SIZE", text, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(text, sizeof text, "%d", port);
    setenv("MASTER_PORT", text, 1);
    setenv("GC_DIST_SECRET", DIST_TEST_SECRET, 1);
}

/* Forks `world` processes running body(rank, world, arg) (ranks listed in `ranks` when not
 * NULL: a test can leave a rank out on purpose); writes each exit status (0-255, or 128 +
 * signal) into status[] and the seconds until the last exited into *elapsed. Returns
 * true when every process ended within `seconds` (the rest are killed and get 128 + 9). */
static inline bool dist_run(int world, const int *ranks, int n_ranks, dist_body body, void *arg, double seconds,
                            int *status, double *elapsed) {
    dist_check_fork_rule(); /* ranks forked after CUDA was asked for would fail at their first call */
    int port = dist_free_port();
    pid_t pids[DIST_SPAWN_MAX];
    int count = ranks ? n_ranks : world;
    if (count > DIST_SPAWN_MAX) exit(GC_TEST_SETUP_ERROR);
    fflush(NULL);
    struct timespec begin, now;
    clock_gettime(CLOCK_MONOTONIC, &begin);
    for (int i = 0; i < count; i++) {
        int rank = ranks ? ranks[i] : i;
        pids[i] = fork();
        if (pids[i] < 0) exit(GC_TEST_SETUP_ERROR);
        if (pids[i] == 0) {
            dist_set_env(rank, world, port);
            gc_test_checks = gc_test_failures = 0; /* a rank reports its own checks, not earlier cases' */
            /* exit, not _exit: the sanitizers' leak check runs in every rank */
            exit(body(rank, world, arg));
        }
        status[i] = -1;
    }
    int left = count;
    bool in_time = true;
    while (left > 0) {
        int raw;
        pid_t done = waitpid(-1, &raw, WNOHANG);
        if (done > 0) {
            for (int i = 0; i < count; i++)
                if (pids[i] == done) status[i] = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
            left--;
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double spent = (double)(now.tv_sec - begin.tv_sec) + 1e-9 * (double)(now.tv_nsec - begin.tv_nsec);
        if (spent > seconds && in_time) {
            in_time = false;
            for (int i = 0; i < count; i++)
                if (status[i] < 0) kill(pids[i], SIGKILL);
        }
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    *elapsed = (double)(now.tv_sec - begin.tv_sec) + 1e-9 * (double)(now.tv_nsec - begin.tv_nsec);
    return in_time;
}

/* dist_run for every rank of the world; true when all exited 0 in time (reporting the ones
 * that did not). */
static inline bool dist_all_pass(int world, dist_body body, void *arg, double seconds) {
    int status[DIST_SPAWN_MAX];
    double elapsed;
    bool ok = dist_run(world, NULL, 0, body, arg, seconds, status, &elapsed);
    for (int i = 0; i < world; i++)
        if (status[i] != 0) {
            fprintf(stderr, "world %d: rank %d exited with %d\n", world, i, status[i]);
            ok = false;
        }
    return ok;
}

/* How many of the bucketer's buckets hold a parameter of `params`. */
static inline int64_t dist_buckets_holding(const gc_ddp *ddp, const gc_param_list *params) {
    int64_t holding = 0;
    for (int b = 0; b < gc_ddp_bucket_count(ddp); b++) {
        bool holds = false;
        for (int i = 0; i < gc_ddp_get_bucket(ddp, b).n_params; i++) {
            int64_t offset;
            gc_tensor *t = gc_ddp_bucket_param(ddp, b, i, &offset)->tensor;
            for (int j = 0; j < params->count; j++) holds |= params->items[j].tensor == t;
        }
        holding += holds;
    }
    return holding;
}

/* A process group for a test body (the TCP backend; every rank of the spawned world). */
static inline gc_process_group *dist_test_group(double timeout) {
    gc_dist_options options = {.backend = GC_DIST_TCP, .timeout_seconds = timeout};
    gc_process_group *group = gc_process_group_from_env(&options);
    if (!group) {
        fprintf(stderr, "rank %s: %s\n", getenv("RANK"), gc_last_error());
        exit(GC_TEST_SETUP_ERROR);
    }
    return group;
}

/* Makes `base` (a template ending in XXXXXX) a unique name for the ranks' stderr files. */
static inline void dist_stderr_base(char *base) {
    int fd = mkstemp(base);
    REQUIRE(fd >= 0);
    close(fd);
}

/* For a rank that is to stop with a fatal error: its stderr goes to the file `base`.RANK
 * (`base` from dist_stderr_base), which dist_read_stderr reads after the run. */
static inline void dist_stderr_to_file(const char *base, int rank) {
    char path[256];
    snprintf(path, sizeof path, "%s.%d", base, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    close(fd);
}

/* What rank `rank` wrote to its stderr file (the first size - 1 bytes), the file removed. */
static inline void dist_read_stderr(const char *base, int rank, char *text, size_t size) {
    char path[256];
    snprintf(path, sizeof path, "%s.%d", base, rank);
    FILE *file = fopen(path, "r");
    REQUIRE(file);
    text[fread(text, 1, size - 1, file)] = 0;
    fclose(file);
    remove(path);
}

#endif
