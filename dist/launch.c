/* The launcher (include/gradcache/launch.h): N processes, their output relayed by rank, and
 * whatever happens to one of them -- or to the launcher -- brought to all of them.
 *
 * One loop, poll() over the processes' pipes and a self-pipe that the signal handlers write
 * to (SIGCHLD, SIGINT, SIGTERM), so that no signal is handled outside the loop. Each process
 * leads a process group of its own, and every signal the launcher sends goes to the whole
 * group: what a process started goes with it. */
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
    int interrupted;    /* a signal the launcher got (SIGINT, SIGTERM); 0: none */
    double kill_at;     /* stopping: when SIGKILL follows SIGTERM; 0: not stopping */
} launcher;

static int signal_pipe[2] = {-1, -1};

static void on_signal(int signal_number) {
    int saved = errno;
    unsigned char byte = (unsigned char)signal_number;
    if (write(signal_pipe[1], &byte, 1) < 0) { /* the pipe is full: a signal is pending anyway */
    }
    errno = saved;
}

static void set_handlers(void (*handler)(int), struct sigaction *old) {
    int signals[] = {SIGCHLD, SIGINT, SIGTERM};
    for (int i = 0; i < 3; i++) {
        struct sigaction action = {.sa_handler = handler};
        sigemptyset(&action.sa_mask);
        if (handler == on_signal) action.sa_flags = SA_RESTART;
        sigaction(signals[i], handler == on_signal ? &action : &old[i], handler == on_signal ? &old[i] : NULL);
    }
}

/* A free port on this machine (bound and released: a small race, as in torchrun). */
static int free_port(void) {
    int fd = gc_socket_listen("127.0.0.1", 0, 1);
    if (fd < 0) return -1;
    int port = gc_socket_port(fd);
    close(fd);
    return port;
}

static void set_int(const char *name, long value) {
    char text[32];
    snprintf(text, sizeof text, "%ld", value);
    setenv(name, text, 1);
}

/* In the child: the environment, the output, then the program. Never returns. */
static void run_child(const launcher *l, int local_rank, const char *addr, int port, int out_fd, int err_fd,
                      pid_t launcher_pid, char *const argv[]) {
    const gc_launch_options *o = l->options;
    /* the launcher's handlers are not this process's: back to the defaults, then let the
     * signals blocked around fork() in (one sent meanwhile now ends this process) */
    struct sigaction defaults = {.sa_handler = SIG_DFL};
    sigemptyset(&defaults.sa_mask);
    sigaction(SIGCHLD, &defaults, NULL);
    sigaction(SIGINT, &defaults, NULL);
    sigaction(SIGTERM, &defaults, NULL);
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
    int nnodes = o->nnodes > 1 ? o->nnodes : 1;
    set_int("RANK", (long)o->node_rank * o->nproc + local_rank);
    set_int("WORLD_SIZE", (long)nnodes * o->nproc);
    set_int("LOCAL_RANK", local_rank);
    set_int("LOCAL_WORLD_SIZE", o->nproc);
    set_int("GROUP_RANK", o->node_rank);
    setenv("MASTER_ADDR", addr, 1);
    set_int("MASTER_PORT", port);
    /* as torchrun does for OMP_NUM_THREADS: the machine's cores shared, not multiplied */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (!getenv("GC_NUM_THREADS")) set_int("GC_NUM_THREADS", cores / o->nproc > 1 ? cores / o->nproc : 1);
    execvp(argv[0], argv);
    fprintf(stderr, "gradcache launch: cannot run '%s': %s\n", argv[0], strerror(errno));
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

static void reap(launcher *l) {
    int raw;
    pid_t pid;
    while ((pid = waitpid(-1, &raw, WNOHANG)) > 0)
        for (int i = 0; i < l->count; i++) {
            process *p = &l->processes[i];
            if (p->pid != pid) continue;
            p->status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
            kill(-pid, SIGKILL); /* whatever it started and left behind */
            p->pid = 0;
            l->running--;
            if (p->status != 0 && l->first_failure == 0 && !l->interrupted) {
                l->first_failure = p->status;
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
static void supervise(launcher *l) {
    struct pollfd *polls = calloc((size_t)(2 * l->count + 1), sizeof *polls);
    if (!polls) gc_fatal("launch: out of host memory");
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
    free(polls);
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

int gc_launch(const gc_launch_options *options, char *const argv[]) {
    if (!valid(options, argv)) return -1;
    launcher l = {.options = options, .count = options->nproc};
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
    if (!l.processes || pipe(signal_pipe) != 0) gc_fatal("launch: out of host memory or pipes");
    fcntl(signal_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
    fcntl(signal_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(signal_pipe[1], F_SETFD, FD_CLOEXEC);
    struct sigaction old[3];
    set_handlers(on_signal, old);
    fflush(NULL);
    pid_t self = getpid();
    bool started = true;
    for (int i = 0; i < l.count && started; i++) {
        int out_read, err_read;
        int out_fd = open_output(&l, i, "out", &out_read), err_fd = out_fd < 0 ? -1 : open_output(&l, i, "err", &err_read);
        /* no handler of the launcher's may run in the child before it has reset them */
        sigset_t launcher_signals, previous;
        sigemptyset(&launcher_signals);
        sigaddset(&launcher_signals, SIGCHLD);
        sigaddset(&launcher_signals, SIGINT);
        sigaddset(&launcher_signals, SIGTERM);
        sigprocmask(SIG_BLOCK, &launcher_signals, &previous);
        pid_t pid = err_fd < 0 ? -1 : fork();
        if (pid == 0) run_child(&l, i, addr, port, out_fd, err_fd, self, argv);
        sigprocmask(SIG_SETMASK, &previous, NULL);
        if (out_fd >= 0) close(out_fd);
        if (err_fd >= 0) close(err_fd);
        if (pid < 0) {
            if (err_fd >= 0) gc_set_error(GC_ERR_IO, "launch: cannot start a process: %s", strerror(errno));
            if (out_read >= 0) close(out_read);
            if (err_fd >= 0 && err_read >= 0) close(err_read);
            started = false;
            break;
        }
        setpgid(pid, pid); /* also here: signals may be sent before the child has run */
        l.processes[i].pid = pid;
        gc_relay_init(&l.processes[i].out, out_read, stdout, options->node_rank * options->nproc + i);
        gc_relay_init(&l.processes[i].err, err_read, stderr, options->node_rank * options->nproc + i);
        l.running++;
    }
    if (!started) {
        char message[512];
        snprintf(message, sizeof message, "%s", gc_last_error());
        stop_all(&l, SIGKILL);
        l.interrupted = SIGKILL;
        supervise(&l);
        gc_set_error(GC_ERR_IO, "%s", message);
    } else {
        supervise(&l);
    }
    set_handlers(NULL, old);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
    free(l.processes);
    if (!started) return -1;
    return l.interrupted ? 128 + l.interrupted : l.first_failure;
}
