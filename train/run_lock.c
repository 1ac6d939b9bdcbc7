/* The run folder's lock (see run_lock.h). */
#define _GNU_SOURCE /* F_OFD_SETLK: a lock per open file description, not per process */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gradcache/train.h"
#include "run_lock.h"

/* The most of the holder's line a refusal quotes: the file is outside input. */
#define HOLDER_MAX 200

static gc_status io_error(const char *path, const char *doing) {
    gc_set_error(GC_ERR_IO, "%s: cannot %s: %s", path, doing, strerror(errno));
    return GC_ERR_IO;
}

/* The whole file, write-locked, without waiting. */
static int try_lock(int fd) {
    struct flock whole = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    return fcntl(fd, F_OFD_SETLK, &whole);
}

/* "pid P on host H since T" of this process into the (held) lock file. */
static gc_status write_holder(int fd, const char *path) {
    char host[256] = "unknown", since[32] = "an unknown time", line[HOLDER_MAX + 64];
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc)) strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &utc);
    int length = snprintf(line, sizeof line, "pid %ld on host %.*s since %s\n", (long)getpid(), 64, host, since);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)length, 0) != length) return io_error(path, "write");
    return GC_OK;
}

/* The holder's line as its file says it, at most HOLDER_MAX bytes, its newline dropped. */
static void read_holder(int fd, char *holder, size_t size) {
    ssize_t length = pread(fd, holder, size - 1, 0);
    holder[length > 0 ? length : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
    if (!holder[0]) snprintf(holder, size, "another process (which has not written its name yet)");
}

gc_status gc_run_lock_take(gc_run_lock *lock, const char *folder) {
    *lock = (gc_run_lock){0};
    char *path = gc_path_join(folder, "lock");
    gc_status status = GC_OK;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        status = io_error(path, "open");
    } else if (try_lock(fd) == 0) {
        status = write_holder(fd, path);
    } else if (errno == EAGAIN || errno == EACCES) {
        char holder[HOLDER_MAX + 1];
        read_holder(fd, holder, sizeof holder);
        gc_set_error(GC_ERR_CONFIG, "%s is being written by %s: one writer per run folder", folder, holder);
        status = GC_ERR_CONFIG;
    } else {
        status = io_error(path, "lock");
    }
    if (status == GC_OK) *lock = (gc_run_lock){.held = true, .fd = fd};
    else if (fd >= 0) close(fd); /* a lock this descriptor took goes with it */
    free(path);
    return status;
}

void gc_run_lock_release(gc_run_lock *lock) {
    if (lock->held) close(lock->fd); /* closing the description drops its lock */
    *lock = (gc_run_lock){0};
}
