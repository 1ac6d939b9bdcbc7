/* The program the launcher tests start: each flag makes it do one thing a real process might
 * (print, exit with a code, die of a signal, hang, ignore SIGTERM, start a grandchild), so that
 * the tests can check what the launcher does about it. Every behaviour can be limited to one
 * rank with --only R. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* DIR/KIND.RANK holding the pid, written whole or not at all (a temporary file renamed):
 * a process stopped while writing must not leave an empty file for the tests to read. */
static void write_pid(const char *dir, const char *kind, int rank, pid_t pid) {
    char path[4096], temporary[4200];
    snprintf(path, sizeof path, "%s/%s.%d", dir, kind, rank);
    snprintf(temporary, sizeof temporary, "%s/.%s.%d.%d", dir, kind, rank, (int)getpid());
    FILE *f = fopen(temporary, "w");
    if (f) {
        fprintf(f, "%d\n", (int)pid);
        if (fclose(f) == 0) rename(temporary, path);
    }
}

int main(int argc, char **argv) {
    const char *rank_text = getenv("RANK");
    int rank = rank_text ? atoi(rank_text) : -1, only = -1;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(flag, "--only") == 0) { /* the flags after it apply to one rank */
            only = atoi(value);
            i++;
            continue;
        }
        bool mine = only < 0 || only == rank;
        if (strcmp(flag, "--env") == 0) {
            if (mine)
                printf("env RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s MASTER_ADDR=%s "
                       "MASTER_PORT=%s\n",
                       getenv("RANK"), getenv("WORLD_SIZE"), getenv("LOCAL_RANK"), getenv("LOCAL_WORLD_SIZE"),
                       getenv("GROUP_RANK"), getenv("MASTER_ADDR"), getenv("MASTER_PORT"));
        } else if (strcmp(flag, "--lines") == 0) { /* N lines on stdout, one write each */
            for (int n = 0; mine && n < atoi(value); n++) printf("rank %d line %d\n", rank, n), fflush(stdout);
            i++;
        } else if (strcmp(flag, "--long-line") == 0) { /* one line of N 'x' on stderr */
            for (int n = 0; mine && n < atoi(value); n++) fputc('x', stderr);
            if (mine) fputc('\n', stderr);
            i++;
        } else if (strcmp(flag, "--nul") == 0) { /* a line with a NUL byte inside */
            if (mine) fwrite("before\0after\n", 1, 13, stdout);
        } else if (strcmp(flag, "--sigpipe") == 0) { /* SIGPIPE's disposition, as exec left it */
            struct sigaction current;
            sigaction(SIGPIPE, NULL, &current);
            if (mine) printf("sigpipe %s\n", current.sa_handler == SIG_IGN ? "ignored" : "default");
        } else if (strcmp(flag, "--no-newline") == 0) {
            if (mine) printf("unfinished");
        } else if (strcmp(flag, "--pids") == 0) { /* DIR/pid.RANK */
            if (mine) write_pid(value, "pid", rank, getpid());
            i++;
        } else if (strcmp(flag, "--grandchild") == 0) { /* a sleeping child of its own: DIR/grandchild.RANK */
            if (mine) {
                pid_t pid = fork();
                if (pid == 0) {
                    for (;;) pause();
                }
                write_pid(value, "grandchild", rank, pid);
            }
            i++;
        } else if (strcmp(flag, "--ignore-term") == 0) {
            if (mine) signal(SIGTERM, SIG_IGN);
        } else if (strcmp(flag, "--sleep") == 0) {
            fflush(NULL);
            if (mine) sleep((unsigned)atoi(value));
            i++;
        } else if (strcmp(flag, "--exit") == 0) {
            fflush(NULL);
            if (mine) return atoi(value);
            i++;
        } else if (strcmp(flag, "--kill-self") == 0) {
            fflush(NULL);
            if (mine) raise(SIGKILL);
        } else {
            fprintf(stderr, "dist_child: unknown flag %s\n", flag);
            return 99;
        }
    }
    fflush(NULL);
    return 0;
}
