/* Runs a program and waits for it (run_program.h). */
#include "run_program.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int gc_run_program(char *const *argv) {
    fflush(NULL); /* what this process printed comes before the program's output */
    pid_t parent = getpid(), child = fork();
    if (child < 0) return -1;
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == parent) execvp(argv[0], argv); /* else the fetch died before that line */
        _exit(127);
    }
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
