/* The launcher (include/gradcache/launch.h): N processes, their output relayed by rank, and
 * whatever happens to one of them -- or to the launcher -- brought to all of them.
 *
 * One loop, poll() over the processes' pipes and a self-pipe that the signal handlers write
 * to (SIGCHLD and the signals passed on), so that no signal is handled outside the loop. Each
 * process leads a process group of its own, and every signal the launcher sends goes to the
 * whole group: what a process started goes with it.
 *
 * The launcher may be a library call inside a program with threads of its own, so between
 * fork() and exec() a child does only what is async-signal-safe: its environment is built
 * before the fork, and a failed exec is reported with write(). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradcache/launch.h"
#include "gradcache/error.h"
#include "launch_relay.h"
#include "launch_report.h"
#include "secret.h"
#include "socket.h"

/* After every process has exited, how long their pipes may stay open (a grandchild holding
 * one) before the groups are killed and the pipes closed. */
#define DRAIN_SECONDS 2.0

typedef struct process {
    pid_t pid;        /* 0 once reaped */
    int status;       /* the launcher's view: exit code, or 128 + signal */
    gc_relay out, err;
} process;

typedef struct launcher {
    const gc_launch_options *options;
    process *processes;
    int count, running;
    int first_failure;  /* the first failing process's status; 0: none yet */
    gc_launch_failure failure; /* that process, reported when the run is over */
    int interrupted;    /* a signal the launcher got (SIGINT, SIGTERM); 0: none */
    double kill_at;     /* stopping: when SIGKILL follows SIGTERM; 0: not stopping */
} launcher;

/* SIGCHLD, then the signals passed on to every process (as torchrun does). */
static const int handled_signals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define HANDLED_SIGNALS ((int)(sizeof handled_signals / sizeof handled_signals[0]))

static int signal_pipe[2] = {-1, -1};
/* The caller's dispositions of the handled signals and of SIGPIPE (the last), restored when
 * the launcher returns; a child gets SIG_IGN where the caller ignored, else the default. */
static struct sigaction caller_dispositions[HANDLED_SIGNALS + 1];

extern char **environ;

static void on_signal(int signal_number) {
    int saved = errno;
    unsigned char byte = (unsigned char)signal_number;
    if (write(signal_pipe[1], &byte, 1) < 0) { /* the pipe is full: a signal is pending anyway */
    }
    errno = saved;
}

/* The launcher's dispositions while it runs, the previous ones kept in `old`: the handled
 * signals go to the self-pipe, and SIGPIPE is ignored so that a reader of the launcher's
 * output going away (`gradcache launch ... | head`) costs that output, not the run. */
static void install_handlers(void) {
    struct sigaction action = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < HANDLED_SIGNALS; i++) sigaction(handled_signals[i], &action, &caller_dispositions[i]);
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &caller_dispositions[HANDLED_SIGNALS]);
}

static void restore_handlers(void) {
    for (int i = 0; i < HANDLED_SIGNALS; i++) sigaction(handled_signals[i], &caller_dispositions[i], NULL);
    sigaction(SIGPIPE, &caller_dispositions[HANDLED_SIGNALS], NULL);
}

/* The handled signals as a set, to block them around fork(). */
static sigset_t handled_set(void) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < HANDLED_SIGNALS; i++) sigaddset(&set, handled_signals[i]);
    return set;
}

/* A free port on this machine (bound and released: a small race, as in torchrun). */
static int free_port(void) {
    int fd = gc_socket_listen("127.0.0.1", 0, 1);
    if (fd < 0) return -1;
    int port = gc_socket_port(fd);
    close(fd);
    return port;
}

/* The run's secret, with which its processes prove to each other that they belong to it
 * (dist/auth.h): the file GC_DIST_SECRET_FILE names, which every process reads itself (it is
 * checked here, so that a bad one is one line from the launcher), or, for a run on this
 * machine alone, a fresh one in `text`, passed on as GC_DIST_SECRET. False (error recorded)
 * without one. */
static bool run_secret(const gc_launch_options *o, char text[GC_DIST_SECRET_TEXT_SIZE]) {
    text[0] = '\0';
    const char *file = getenv("GC_DIST_SECRET_FILE");
    if (file && *file) {
        gc_dist_secret secret;
        if (gc_dist_secret_from_env(&secret) == GC_OK) return true;
        gc_set_error(gc_last_status(), "launch: %s", gc_last_error());
        return false;
    }
    if (o->nnodes > 1) {
        gc_set_error(GC_ERR_FORMAT, "launch: %d nodes need GC_DIST_SECRET_FILE, naming the same secret on every node "
                     "(head -c 32 /dev/urandom >FILE; chmod 600 FILE)", o->nnodes);
        return false;
    }
    if (gc_dist_secret_make_text(text) == GC_OK) return true;
    gc_set_error(GC_ERR_IO, "launch: %s", gc_last_error());
    return false;
}

/* The variables a process gets, each "NAME=value" (NULL name: the end). */
typedef struct child_variable {
    const char *name;
    char text[160];
} child_variable;

/* The environment of process `local_rank`: the launcher's own, with torchrun's variables set
 * (replacing any the launcher had). NULL (error recorded) without memory. Free with free():
 * one block holds the array and the new strings. */
static char **child_environment(const gc_launch_options *o, int local_rank, const char *addr, int port,
                                const char *secret) {
    int nnodes = o->nnodes > 1 ? o->nnodes : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    child_variable set[] = {
        {"RANK", ""}, {"WORLD_SIZE", ""}, {"LOCAL_RANK", ""}, {"LOCAL_WORLD_SIZE", ""}, {"GROUP_RANK", ""},
        {"MASTER_ADDR", ""}, {"MASTER_PORT", ""},
        /* as torchrun does for OMP_NUM_THREADS: the machine's cores shared, not multiplied */
        {getenv("GC_NUM_THREADS") ? NULL : "GC_NUM_THREADS", ""},
        {*secret ? "GC_DIST_SECRET" : NULL, ""}, /* none: every process reads GC_DIST_SECRET_FILE */
    };
    long values[] = {(long)o->node_rank * o->nproc + local_rank, (long)nnodes * o->nproc, local_rank, o->nproc,
                     o->node_rank, 0, port, cores / o->nproc > 1 ? cores / o->nproc : 1, 0};
    int count = (int)(sizeof set / sizeof set[0]);
    for (int i = 0; i < count; i++) {
        if (!set[i].name) continue;
        if (strcmp(set[i].name, "MASTER_ADDR") == 0) snprintf(set[i].text, sizeof set[i].text, "%s=%s", set[i].name, addr);
        else if (strcmp(set[i].name, "GC_DIST_SECRET") == 0)
            snprintf(set[i].text, sizeof set[i].text, "%s=%s", set[i].name, secret);
        else snprintf(set[i].text, sizeof set[i].text, "%s=%ld", set[i].name, values[i]);
    }
    size_t inherited = 0;
    while (environ[inherited]) inherited++;
    char **env = malloc((inherited + (size_t)count + 1) * sizeof *env + sizeof set);
    if (!env) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "launch: out of host memory for an environment");
        return NULL;
    }
    child_variable *own = (child_variable *)(env + inherited + count + 1);
    memcpy(own, set, sizeof set);
    size_t n = 0;
    for (size_t i = 0; i < inherited; i++) {
        bool replaced = false;
        for (int k = 0; k < count && !replaced; k++) {
            size_t length = own[k].name ? strlen(own[k].name) : 0;
            replaced = length && strncmp(environ[i], own[k].name, length) == 0 && environ[i][length] == '=';
        }
        if (!replaced) env[n++] = environ[i];
    }
    for (int k = 0; k < count; k++)
        if (own[k].name) env[n++] = own[k].text;
    env[n] = NULL;
    return env;
}

static void write_text(int fd, const char *text) {
    if (write(fd, text, strlen(text)) < 0) { /* nowhere left to report it */
    }
}

/* In the child: signals, the output, the environment, then the program. Never returns.
 * Only async-signal-safe calls (the launcher may have threads). */
static void run_child(int out_fd, int err_fd, char **env, pid_t launcher_pid, char *const argv[]) {
    /* the launcher's dispositions are not this process's (its ignored SIGPIPE would survive
     * exec): back to the caller's, a handler as the default (exec would reset it anyway, and
     * it must not run here); then let the signals blocked around fork() in (one sent
     * meanwhile now ends this process) */
    for (int i = 0; i <= HANDLED_SIGNALS; i++) {
        struct sigaction inherited = {.sa_handler = caller_dispositions[i].sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL};
        sigemptyset(&inherited.sa_mask);
        sigaction(i < HANDLED_SIGNALS ? handled_signals[i] : SIGPIPE, &inherited, NULL);
    }
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the launcher's death takes this process too ... */
    if (getppid() != launcher_pid) _exit(1); /* ... even if it died before that line */
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    environ = env;
    execvp(argv[0], argv);
    const char *why = strerror(errno);
    write_text(STDERR_FILENO, "gradcache launch: cannot run '");
    write_text(STDERR_FILENO, argv[0]);
    write_text(STDERR_FILENO, "': ");
    write_text(STDERR_FILENO, why);
    write_text(STDERR_FILENO, "\n");
    _exit(127);
}

/* A pipe for one output stream (its read end kept from the children), or the log file. */
static int open_output(const launcher *l, int local_rank, const char *suffix, int *read_end) {
    *read_end = -1;
    if (l->options->log_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank_%d.%s", l->options->log_dir,
                 l->options->node_rank * l->options->nproc + local_rank, suffix);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) gc_set_error(GC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return fd;
    }
    int ends[2];
    if (pipe(ends) != 0) {
        gc_set_error(GC_ERR_IO, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    fcntl(ends[0], F_SETFD, FD_CLOEXEC);
    fcntl(ends[1], F_SETFD, FD_CLOEXEC); /* dup2 in the child clears it on the copy */
    *read_end = ends[0];
    return ends[1];
}

/* Sends `signal_number` to every running process's group. */
static void signal_all(launcher *l, int signal_number) {
    for (int i = 0; i < l->count; i++)
        if (l->processes[i].pid > 0) kill(-l->processes[i].pid, signal_number);
}

/* Starts stopping every process: `signal_number` now, SIGKILL after the grace period. */
static void stop_all(launcher *l, int signal_number) {
    signal_all(l, signal_number);
    if (l->kill_at == 0) {
        double grace = l->options->grace_seconds > 0 ? l->options->grace_seconds : 5.0;
        l->kill_at = gc_deadline_after(grace);
    }
}

/* Reaps the launcher's own processes only, pid by pid: a program calling gc_launch may have
 * children of its own to wait for. */
static void reap(launcher *l) {
    for (int i = 0; i < l->count; i++) {
        process *p = &l->processes[i];
        int raw;
        pid_t pid = p->pid;
        if (pid <= 0 || waitpid(pid, &raw, WNOHANG) != pid) continue;
        p->status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
        kill(-pid, SIGKILL); /* whatever it started and left behind */
        p->pid = 0;
        l->running--;
        if (p->status != 0 && l->first_failure == 0 && !l->interrupted) {
            l->first_failure = p->status;
            l->failure = (gc_launch_failure){l->options->node_rank * l->options->nproc + i, pid, raw, l->running};
            stop_all(l, SIGTERM);
        }
    }
}

static void handle_signals(launcher *l) {
    unsigned char signals[64];
    ssize_t got = read(signal_pipe[0], signals, sizeof signals);
    for (ssize_t i = 0; i < got; i++) {
        if (signals[i] == SIGCHLD) continue; /* reaped below, whatever woke the loop */
        if (!l->interrupted) l->interrupted = signals[i];
        stop_all(l, signals[i]); /* forwarded as it came */
    }
    reap(l);
}

/* The loop: relay output, reap, stop; until every process is gone and every pipe closed. */
static void supervise(launcher *l, struct pollfd *polls /* [2 * count + 1] */) {
    double drain_until = 0;
    for (;;) {
        int n = 0;
        polls[n++] = (struct pollfd){.fd = signal_pipe[0], .events = POLLIN};
        for (int i = 0; i < l->count; i++) {
            polls[n++] = (struct pollfd){.fd = l->processes[i].out.fd, .events = POLLIN};
            polls[n++] = (struct pollfd){.fd = l->processes[i].err.fd, .events = POLLIN};
        }
        bool pipes_open = false;
        for (int i = 1; i < n; i++) pipes_open |= polls[i].fd >= 0;
        if (l->running == 0 && !pipes_open) break;
        if (l->running == 0 && drain_until == 0) drain_until = gc_deadline_after(DRAIN_SECONDS);
        if (drain_until > 0 && gc_ms_until(drain_until) == 0) break; /* a grandchild holds a pipe */
        int timeout = 100;
        if (poll(polls, (nfds_t)n, timeout) < 0 && errno != EINTR) break;
        if (polls[0].revents) handle_signals(l);
        for (int i = 0; i < l->count; i++) {
            if (polls[1 + 2 * i].revents) gc_relay_read(&l->processes[i].out);
            if (polls[2 + 2 * i].revents) gc_relay_read(&l->processes[i].err);
        }
        reap(l); /* a SIGCHLD can arrive between two polls */
        if (l->kill_at > 0 && gc_ms_until(l->kill_at) == 0) signal_all(l, SIGKILL);
    }
    for (int i = 0; i < l->count; i++) {
        gc_relay_close(&l->processes[i].out);
        gc_relay_close(&l->processes[i].err);
    }
}

static bool valid(const gc_launch_options *o, char *const argv[]) {
    int nnodes = o->nnodes > 1 ? o->nnodes : 1;
    const char *problem = NULL;
    if (o->nproc < 1) problem = "at least one process per node is needed";
    else if (o->node_rank < 0 || o->node_rank >= nnodes) problem = "the node rank is outside [0, nnodes)";
    else if (nnodes > 1 && (!o->master_addr || o->master_port < 1))
        problem = "several nodes need the master's address and port";
    else if (o->master_port < 0 || o->master_port > 65535) problem = "the master port is outside 0..65535";
    else if (!argv || !argv[0]) problem = "no program to run";
    if (problem) gc_set_error(GC_ERR_FORMAT, "launch: %s", problem);
    return problem == NULL;
}

/* Starts process `i`: its output, its environment, fork and exec. False (error recorded)
 * when it could not be started. */
static bool start_process(launcher *l, int i, const char *addr, int port, const char *secret, pid_t self,
                          char *const argv[]) {
    const gc_launch_options *o = l->options;
    int rank = o->node_rank * o->nproc + i;
    int out_read = -1, err_read = -1;
    int out_fd = open_output(l, i, "out", &out_read);
    int err_fd = out_fd < 0 ? -1 : open_output(l, i, "err", &err_read);
    char **env = err_fd < 0 ? NULL : child_environment(o, i, addr, port, secret);
    bool ready = env && gc_relay_init(&l->processes[i].out, out_read, stdout, rank) == GC_OK &&
                 gc_relay_init(&l->processes[i].err, err_read, stderr, rank) == GC_OK;
    pid_t pid = -1;
    if (ready) {
        /* no handler of the launcher's may run in the child before it has reset them */
        sigset_t blocked = handled_set(), previous;
        sigprocmask(SIG_BLOCK, &blocked, &previous);
        pid = fork();
        if (pid == 0) run_child(out_fd, err_fd, env, self, argv);
        sigprocmask(SIG_SETMASK, &previous, NULL);
        if (pid < 0) gc_set_error(GC_ERR_IO, "launch: cannot start a process: %s", strerror(errno));
    }
    free(env);
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    if (pid < 0) { /* the read ends: the relays' if they took them, else still ours */
        gc_relay *relays[2] = {&l->processes[i].out, &l->processes[i].err};
        int read_ends[2] = {out_read, err_read};
        for (int k = 0; k < 2; k++) {
            if (relays[k]->fd >= 0) gc_relay_close(relays[k]);
            else if (read_ends[k] >= 0) close(read_ends[k]);
        }
        return false;
    }
    setpgid(pid, pid); /* also here: signals may be sent before the child has run */
    l->processes[i].pid = pid;
    l->running++;
    return true;
}

int gc_launch(const gc_launch_options *options, char *const argv[]) {
    if (!valid(options, argv)) return -1;
    launcher l = {.options = options, .count = options->nproc};
    char secret[GC_DIST_SECRET_TEXT_SIZE];
    if (!run_secret(options, secret)) return -1;
    const char *addr = options->master_addr ? options->master_addr : "127.0.0.1";
    int port = options->master_port ? options->master_port : free_port();
    if (port < 0) {
        gc_set_error(GC_ERR_IO, "launch: no free port for the rendezvous: %s", gc_last_error());
        return -1;
    }
    if (options->log_dir && mkdir(options->log_dir, 0755) != 0 && errno != EEXIST) {
        gc_set_error(GC_ERR_IO, "launch: cannot create %s: %s", options->log_dir, strerror(errno));
        return -1;
    }
    l.processes = calloc((size_t)l.count, sizeof *l.processes);
    struct pollfd *polls = calloc((size_t)(2 * l.count + 1), sizeof *polls);
    if (!l.processes || !polls) {
        free(l.processes);
        free(polls);
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "launch: out of host memory for %d processes", l.count);
        return -1;
    }
    for (int i = 0; i < l.count; i++) l.processes[i].out.fd = l.processes[i].err.fd = -1;
    if (pipe(signal_pipe) != 0) {
        gc_set_error(GC_ERR_IO, "launch: cannot create a pipe: %s", strerror(errno));
        free(l.processes);
        free(polls);
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        fcntl(signal_pipe[k], F_SETFL, O_NONBLOCK);
        fcntl(signal_pipe[k], F_SETFD, FD_CLOEXEC);
    }
    install_handlers();
    fflush(NULL);
    pid_t self = getpid();
    bool started = true;
    for (int i = 0; i < l.count && started; i++) started = start_process(&l, i, addr, port, secret, self, argv);
    if (!started) {
        char message[512];
        snprintf(message, sizeof message, "%s", gc_last_error());
        stop_all(&l, SIGKILL);
        l.interrupted = SIGKILL;
        supervise(&l, polls);
        gc_set_error(GC_ERR_IO, "%s", message);
    } else {
        supervise(&l, polls);
    }
    restore_handlers();
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
    free(l.processes);
    free(polls);
    if (!started) return -1;
    /* after every process's own last lines: the summary ends the output, as torchrun's does */
    if (l.first_failure) gc_launch_report_failure(stderr, &l.failure);
    return l.interrupted ? 128 + l.interrupted : l.first_failure;
}
