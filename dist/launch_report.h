/* The launcher's own line about a run that ended badly: which process failed first and how,
 * as torchrun's error summary names its root cause, so that a run killed by the kernel (no
 * word from the process itself) or a program that fails silently (`false`) still says which
 * process it was. Private to dist/. */
#ifndef GC_DIST_LAUNCH_REPORT_H
#define GC_DIST_LAUNCH_REPORT_H

#include <stdio.h>
#include <sys/types.h>

/* The first process that ended badly. */
typedef struct gc_launch_failure {
    int rank;
    pid_t pid;
    int wait_status; /* as waitpid() gave it: an exit status or a signal, told apart */
    int others;      /* processes still running when it ended, which the launcher stopped */
} gc_launch_failure;

/* Writes the one line, e.g. "gradcache launch: rank 1 (pid 4242) was killed by SIGKILL
 * (Killed), the first process to fail; the launcher stopped the 2 others", and flushes it. */
void gc_launch_report_failure(FILE *out, const gc_launch_failure *failure);

#endif
