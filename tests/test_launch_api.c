/* gc_launch called from a program (the library's use, not the CLI's): the caller's own
 * children are left for the caller to wait for, the caller's signal dispositions are back as
 * they were, the processes get the caller's dispositions (not the launcher's ignored
 * SIGPIPE), and bad options are an error returned, not a stop.
 * usage: test_launch_api DIST_CHILD WORK_DIR */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradcache/error.h"
#include "gradcache/launch.h"

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

/* The first line of DIR/rank_0.out, or "" */
static void first_line(const char *dir, char *line, size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank_0.out", dir);
    line[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(line, (int)size, f)) line[0] = 0;
    line[strcspn(line, "\n")] = 0;
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_launch_api DIST_CHILD WORK_DIR\n");
        return 99;
    }
    char *const exits_zero[] = {argv[1], "--exit", "0", NULL};
    gc_launch_options options = {.nproc = 2};

    /* a child of the caller's own, exiting while the launcher runs, is still the caller's */
    pid_t own = fork();
    if (own == 0) {
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
        _exit(7);
    }
    char *const sleeps[] = {argv[1], "--sleep", "1", NULL};
    check(gc_launch(&options, sleeps) == 0, "two processes exiting 0: status 0");
    int raw = 0;
    check(waitpid(own, &raw, 0) == own && WIFEXITED(raw) && WEXITSTATUS(raw) == 7,
          "the caller's own child was left for the caller to reap, with its status 7");

    /* the caller's dispositions come back; the processes get them, not the launcher's */
    char *const sigpipe[] = {argv[1], "--sigpipe", NULL};
    gc_launch_options logged = {.nproc = 1, .log_dir = argv[2]};
    char line[256];
    for (int ignore = 0; ignore < 2; ignore++) {
        signal(SIGPIPE, ignore ? SIG_IGN : SIG_DFL);
        check(gc_launch(&logged, sigpipe) == 0, "the SIGPIPE probe runs");
        first_line(argv[2], line, sizeof line);
        check(strcmp(line, ignore ? "sigpipe ignored" : "sigpipe default") == 0,
              "a process gets the caller's SIGPIPE disposition");
        struct sigaction now;
        sigaction(SIGPIPE, NULL, &now);
        check(now.sa_handler == (ignore ? SIG_IGN : SIG_DFL), "the caller's SIGPIPE disposition is back");
    }
    struct sigaction term;
    sigaction(SIGTERM, NULL, &term);
    check(term.sa_handler == SIG_DFL, "the caller's SIGTERM disposition is back");

    /* bad options: -1 and an error, the caller still running */
    gc_launch_options none = {.nproc = 0};
    check(gc_launch(&none, exits_zero) == -1 && gc_last_status() == GC_ERR_FORMAT, "no processes: an error");
    char *const empty[] = {NULL};
    check(gc_launch(&options, empty) == -1 && strstr(gc_last_error(), "no program"), "no program: an error");
    if (failures == 0) printf("test_launch_api: all checks passed\n");
    return failures ? 1 : 0;
}
