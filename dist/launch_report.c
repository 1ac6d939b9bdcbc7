/* The launcher's line about the first failure (see launch_report.h). */
#include "launch_report.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

/* The signal's name, "SIGKILL" style ("signal N" for one without a name here). */
static const char *signal_name(int signal_number, char *buffer, size_t size) {
    /* POSIX has no call for the short name (glibc's sigabbrev_np is an extension): these are
     * the signals a process of a run dies of, the others get their number */
    static const struct {
        int number;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].number == signal_number) return names[i].name;
    snprintf(buffer, size, "signal %d", signal_number);
    return buffer;
}

void gc_launch_report_failure(FILE *out, const gc_launch_failure *failure) {
    char how[160], others[80];
    if (WIFSIGNALED(failure->wait_status)) {
        int signal_number = WTERMSIG(failure->wait_status);
        char number[32];
        snprintf(how, sizeof how, "was killed by %s (%s)", signal_name(signal_number, number, sizeof number),
                 strsignal(signal_number));
    } else {
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(failure->wait_status));
    }
    if (failure->others > 0)
        snprintf(others, sizeof others, "the launcher stopped the %d other%s", failure->others,
                 failure->others == 1 ? "" : "s");
    else
        snprintf(others, sizeof others, "no other process was running");
    fprintf(out, "gradcache launch: rank %d (pid %ld) %s, the first process to fail; %s\n", failure->rank,
            (long)failure->pid, how, others);
    fflush(out);
}
