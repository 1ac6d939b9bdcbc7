/* The launcher: N processes of one program on this machine, with the environment that
 * torchrun gives its workers, so that gc_dist_env_read() and a process group find each
 * other (the role of `torchrun --nproc-per-node N`).
 *
 * Every process gets RANK (node_rank * nproc + local rank), WORLD_SIZE (nnodes * nproc),
 * LOCAL_RANK, LOCAL_WORLD_SIZE (nproc), GROUP_RANK (node_rank), MASTER_ADDR and MASTER_PORT,
 * on top of the launcher's own environment; and the run's secret (include/gradcache/dist.h):
 * with GC_DIST_SECRET_FILE set, every process reads that file (checked by the launcher
 * first); otherwise, on one node, a fresh random one in GC_DIST_SECRET. Several nodes need
 * GC_DIST_SECRET_FILE, the same secret on each. Their standard output and error pass through the
 * launcher line by line, each line prefixed with "[RANK] " (or, with log_dir, written to
 * LOG_DIR/rank_RANK.out and .err instead).
 *
 * Failure handling: when one process exits with a non-zero status or is killed by a signal,
 * the launcher sends SIGTERM to every other one (to its whole process group, so that what
 * it started goes too), then SIGKILL after grace_seconds, waits for all of them, and
 * returns the first failure's status. Once every process is gone it writes one line of its
 * own on stderr, after all of theirs, naming that first failure, as torchrun's error summary
 * does: "gradcache launch: rank 1 (pid 4242) was killed by SIGKILL (Killed), the first process
 * to fail; the launcher stopped the 2 others" (or "exited with status 3"), so that a process
 * that died without a word (the kernel's OOM killer, `false`) is still named. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the
 * launcher are forwarded to every process the same way. Each process also gets SIGKILL if the
 * launcher itself dies (Linux's parent-death signal), so that no process of the run outlives it.
 *
 * For a program calling it: while it runs, gc_launch handles those signals and SIGCHLD and
 * ignores SIGPIPE (a reader of its output going away costs that output, not the run), then
 * puts the caller's dispositions back; the processes start with the caller's dispositions.
 * It waits for its own processes only, so the caller's other children stay the caller's.
 * Not reentrant: one gc_launch at a time per program. */
#ifndef GRADCACHE_LAUNCH_H
#define GRADCACHE_LAUNCH_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_launch_options {
    int nproc;               /* processes on this node (>= 1) */
    int nnodes;              /* machines taking part (0 or 1: this one only) */
    int node_rank;           /* this machine's index in [0, nnodes) */
    const char *master_addr; /* where rank 0 serves the rendezvous; NULL: 127.0.0.1 */
    int master_port;         /* 0: a free port picked on this machine (one node only) */
    double grace_seconds;    /* between SIGTERM and SIGKILL; 0: 5 s */
    const char *log_dir;     /* NULL: prefixed lines on the launcher's stdout/stderr */
} gc_launch_options;

/* Runs argv (argv[0] found on PATH as execvp does; NULL-terminated) in nproc processes and
 * waits for all of them. Returns 0 when every process exited with 0; the first failing
 * process's exit status, or 128 + the signal that killed it; 128 + the signal when the
 * launcher was interrupted (after stopping every process). A program that cannot be
 * executed makes its processes exit with 127 (one line on stderr naming it), as a shell
 * does. Returns -1 with an error recorded (gc_last_error) when the run could not start (bad
 * options, no free port, no secret or a bad secret file, fork failing): then no process is
 * left running. */
int gc_launch(const gc_launch_options *options, char *const argv[]);

#ifdef __cplusplus
}
#endif
#endif
