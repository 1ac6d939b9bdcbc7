/* The run's secret (see secret.h). */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

gc_status gc_dist_random_bytes(void *out, size_t size) {
    unsigned char *bytes = out;
    while (size) {
        ssize_t got = getrandom(bytes, size, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            gc_set_error(GC_ERR_IO, "no random bytes from the system (getrandom): %s", strerror(errno));
            return GC_ERR_IO;
        }
        bytes += got;
        size -= (size_t)got;
    }
    return GC_OK;
}

static gc_status size_refused(const char *source, size_t size) {
    gc_set_error(GC_ERR_FORMAT, "%s holds a secret of %zu bytes: from %d to %d are needed (e.g. head -c 32 /dev/urandom)",
                 source, size, GC_DIST_SECRET_MIN, GC_DIST_SECRET_MAX);
    return GC_ERR_FORMAT;
}

/* The file's bytes, if it is a regular file only its owner can read. */
static gc_status read_file(const char *path, gc_dist_secret *secret) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0) {
        gc_set_error(GC_ERR_IO, "GC_DIST_SECRET_FILE=%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return GC_ERR_IO;
    }
    const char *problem = !S_ISREG(info.st_mode)      ? "is not a regular file"
                          : (info.st_mode & 077) != 0 ? "can be read or written by other users (chmod 600 it)"
                                                      : NULL;
    if (problem) {
        gc_set_error(GC_ERR_FORMAT, "GC_DIST_SECRET_FILE=%s %s", path, problem);
        close(fd);
        return GC_ERR_FORMAT;
    }
    /* one byte more than the largest secret: a longer file is refused, not cut */
    uint8_t bytes[GC_DIST_SECRET_MAX + 1];
    size_t size = 0;
    while (size < sizeof bytes) {
        ssize_t got = read(fd, bytes + size, sizeof bytes - size);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            gc_set_error(GC_ERR_IO, "GC_DIST_SECRET_FILE=%s: cannot read: %s", path, strerror(errno));
            close(fd);
            return GC_ERR_IO;
        }
        if (got == 0) break;
        size += (size_t)got;
    }
    close(fd);
    if (size < GC_DIST_SECRET_MIN || size > GC_DIST_SECRET_MAX) {
        char source[300];
        snprintf(source, sizeof source, "GC_DIST_SECRET_FILE=%.256s", path);
        return size_refused(source, size);
    }
    memcpy(secret->bytes, bytes, size);
    secret->size = size;
    return GC_OK;
}

gc_status gc_dist_secret_from_env(gc_dist_secret *secret) {
    secret->size = 0;
    const char *path = getenv("GC_DIST_SECRET_FILE"), *text = getenv("GC_DIST_SECRET");
    if (path && *path) return read_file(path, secret);
    if (!text || !*text) {
        gc_set_error(GC_ERR_FORMAT, "no secret for the run: GC_DIST_SECRET_FILE must name a file of at least %d random "
                     "bytes, mode 0600, the same for every process (gradcache launch makes one for a run on one "
                     "machine)", GC_DIST_SECRET_MIN);
        return GC_ERR_FORMAT;
    }
    size_t size = strlen(text);
    if (size < GC_DIST_SECRET_MIN || size > GC_DIST_SECRET_MAX) return size_refused("GC_DIST_SECRET", size);
    memcpy(secret->bytes, text, size);
    secret->size = size;
    return GC_OK;
}

gc_status gc_dist_secret_make_text(char text[GC_DIST_SECRET_TEXT_SIZE]) {
    uint8_t bytes[GC_DIST_SECRET_MIN];
    if (gc_dist_random_bytes(bytes, sizeof bytes) != GC_OK) return GC_ERR_IO;
    for (size_t i = 0; i < sizeof bytes; i++) snprintf(text + 2 * i, 3, "%02x", bytes[i]);
    return GC_OK;
}
