/* Output files written whole or not at all (see output_file.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output_file.h"

static char *copy_string(const char *text) {
    char *copy = malloc(strlen(text) + 1);
    if (!copy) gc_fatal("output_file: out of host memory");
    return strcpy(copy, text);
}

static gc_status io_error(const char *path, const char *what) {
    gc_set_error(GC_ERR_IO, "%s: cannot %s: %s", path, what, strerror(errno));
    return GC_ERR_IO;
}

gc_status gc_output_open(gc_output_file *out, const char *path) {
    *out = (gc_output_file){0};
    /* Next to the destination, so that the rename stays within one file system (atomic);
     * hidden, so that a crash leaves no file that looks like a result. */
    const char *slash = strrchr(path, '/');
    size_t directory = slash ? (size_t)(slash - path + 1) : 0;
    size_t size = strlen(path) + sizeof "/..tmp-XXXXXX";
    char *temp_path = malloc(size);
    if (!temp_path) gc_fatal("output_file: out of host memory");
    snprintf(temp_path, size, "%.*s.%s.tmp-XXXXXX", (int)directory, path, path + directory);
    int fd = mkstemp(temp_path);
    if (fd < 0) {
        free(temp_path);
        return io_error(path, "create a file there");
    }
    /* mkstemp makes the file private (0600); an output gets the usual mode (0666 - umask) */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    out->file = fdopen(fd, "w");
    if (!out->file) {
        close(fd);
        unlink(temp_path);
        free(temp_path);
        return io_error(path, "open it for writing");
    }
    out->path = copy_string(path);
    out->temp_path = temp_path;
    return GC_OK;
}

static void release(gc_output_file *out) {
    free(out->path);
    free(out->temp_path);
    *out = (gc_output_file){0};
}

gc_status gc_output_commit(gc_output_file *out) {
    bool written = !ferror(out->file) && fflush(out->file) == 0 && fsync(fileno(out->file)) == 0;
    bool closed = fclose(out->file) == 0;
    out->file = NULL;
    gc_status status = GC_OK;
    if (!written || !closed) status = io_error(out->path, "write it");
    else if (rename(out->temp_path, out->path) != 0) status = io_error(out->path, "rename the temporary file to it");
    if (status != GC_OK) unlink(out->temp_path);
    release(out);
    return status;
}

void gc_output_abort(gc_output_file *out) {
    if (!out->file) return;
    fclose(out->file);
    unlink(out->temp_path);
    release(out);
}
