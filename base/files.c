/* Files and folders written whole or not at all (include/gradcache/files.h).
 *
 * A temporary is ".<name>.tmp.<pid>.<suffix>", six random letters making it unique among the
 * writers of one process; it is created with O_EXCL (mkdir for a folder) and the mode a plain
 * creation would get, the kernel applying the umask. Earlier versions wrote ".<name>.tmp.<pid>"
 * and "<name>.tmp.<pid>": the clean-up recognises those too. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gradcache/files.h"

#define SUFFIX_LETTERS 6

/* The folder holding `path` ("." for a bare name) in a new string, and its last part. */
static char *folder_of(const char *path, const char **name) {
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    char *folder = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!folder) gc_fatal("files: out of host memory");
    return folder;
}

/* A new temporary name for `path`: "<folder>/.<name>.tmp.<pid>.<suffix>". */
static char *temporary_name(const char *path) {
    const char *name;
    char *folder = folder_of(path, &name);
    unsigned char random[SUFFIX_LETTERS];
    if (getrandom(random, sizeof random, 0) != (ssize_t)sizeof random) /* never short for 6 bytes; a fallback */
        for (int i = 0; i < SUFFIX_LETTERS; i++) random[i] = (unsigned char)rand();
    char suffix[SUFFIX_LETTERS + 1];
    for (int i = 0; i < SUFFIX_LETTERS; i++) suffix[i] = (char)('a' + random[i] % 26);
    suffix[SUFFIX_LETTERS] = '\0';
    int length = snprintf(NULL, 0, "%s/.%s.tmp.%ld.%s", folder, name, (long)getpid(), suffix);
    char *temporary = malloc((size_t)length + 1);
    if (!temporary) gc_fatal("files: out of host memory");
    snprintf(temporary, (size_t)length + 1, "%s/.%s.tmp.%ld.%s", folder, name, (long)getpid(), suffix);
    free(folder);
    return temporary;
}

static gc_status io_error(const char *path, const char *what) {
    gc_set_error(GC_ERR_IO, "%s: cannot %s: %s", path, what, strerror(errno));
    return GC_ERR_IO;
}

/* Makes a rename in the folder of `path` durable: the folder's entry is what a crash would
 * otherwise lose. */
static bool sync_folder_of(const char *path) {
    const char *name;
    char *folder = folder_of(path, &name);
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(folder);
    if (fd < 0) return false;
    bool synced = fsync(fd) == 0;
    int error = errno;
    close(fd);
    errno = error;
    return synced;
}

gc_status gc_file_begin(gc_file_writer *writer, const char *path) {
    *writer = (gc_file_writer){0};
    char *temporary = NULL;
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 16; attempt++) { /* another writer's name: draw again */
        free(temporary);
        temporary = temporary_name(path);
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    FILE *file = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!file) {
        gc_status status = io_error(path, "create a file next to it");
        if (fd >= 0) {
            close(fd);
            unlink(temporary);
        }
        free(temporary);
        return status;
    }
    char *destination = strdup(path);
    if (!destination) gc_fatal("files: out of host memory");
    *writer = (gc_file_writer){file, destination, temporary};
    return GC_OK;
}

static void release(gc_file_writer *writer) {
    free(writer->path);
    free(writer->temporary);
    *writer = (gc_file_writer){0};
}

gc_status gc_file_commit(gc_file_writer *writer) {
    bool written = !ferror(writer->file) && fflush(writer->file) == 0 && fsync(fileno(writer->file)) == 0;
    int error = errno; /* the write's reason, which fclose must not overwrite */
    bool closed = fclose(writer->file) == 0;
    writer->file = NULL;
    gc_status status = GC_OK;
    if (!written || !closed) {
        if (!written) errno = error;
        status = io_error(writer->path, "write it");
    } else if (rename(writer->temporary, writer->path) != 0) {
        status = io_error(writer->path, "rename its temporary file to it");
    } else if (!sync_folder_of(writer->path)) {
        status = io_error(writer->path, "make it durable (fsync of its folder)");
    }
    if (status != GC_OK) unlink(writer->temporary); /* after a rename: already gone */
    release(writer);
    return status;
}

void gc_file_abort(gc_file_writer *writer) {
    if (!writer->file) return;
    fclose(writer->file);
    unlink(writer->temporary);
    release(writer);
}

gc_status gc_folder_begin(const char *path, char **temporary) {
    *temporary = NULL;
    for (int attempt = 0; attempt < 16; attempt++) {
        char *name = temporary_name(path);
        if (mkdir(name, 0777) == 0) {
            *temporary = name;
            return GC_OK;
        }
        free(name);
        if (errno != EEXIST) break;
    }
    return io_error(path, "create a folder next to it");
}

gc_status gc_folder_commit(const char *from, const char *path) {
    if (rename(from, path) != 0) {
        gc_set_error(GC_ERR_IO, "cannot move %s to %s: %s", from, path, strerror(errno));
        return GC_ERR_IO;
    }
    return sync_folder_of(path) ? GC_OK : io_error(path, "make it durable (fsync of its folder)");
}

static int remove_entry(const char *path, const struct stat *info, int kind, struct FTW *where) {
    (void)info, (void)kind, (void)where;
    if (remove(path) == 0 || errno == ENOENT) return 0;
    io_error(path, "remove it");
    return 1;
}

gc_status gc_folder_remove(const char *path) {
    /* depth first (a folder after what it holds), links removed rather than followed */
    int result = nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (result == 0 || (result < 0 && errno == ENOENT)) return GC_OK;
    if (result < 0) io_error(path, "remove it");
    return GC_ERR_IO;
}

/* The writer's process id when `entry` is a temporary of `name`: ".<name>.tmp.<pid>" followed
 * by nothing or by "." and a suffix (the visible "<name>.tmp.<pid>" of earlier versions too);
 * else 0. */
static long temporary_owner(const char *entry, const char *name) {
    size_t length = strlen(name);
    if (entry[0] == '.' && strncmp(entry + 1, name, length) == 0 && strncmp(entry + 1 + length, ".tmp.", 5) == 0)
        entry++; /* the hidden form */
    if (strncmp(entry, name, length) != 0 || strncmp(entry + length, ".tmp.", 5) != 0) return 0;
    const char *c = entry + length + 5;
    long pid = 0;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (pid > 99999999) return 0; /* pids are far smaller */
        pid = pid * 10 + (*c - '0');
    }
    bool ends_well = *c == '\0' || (*c == '.' && c[1] != '\0');
    return c > entry + length + 5 && ends_well ? pid : 0;
}

/* True when no process has id `pid` (kill with signal 0 only checks). A process that exists
 * but is not ours (EPERM) is alive, and so is this one. */
static bool process_gone(long pid) {
    return pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

gc_status gc_remove_stale_temporaries(const char *path, int *removed) {
    const char *name;
    char *folder = folder_of(path, &name);
    if (removed) *removed = 0;
    DIR *dir = opendir(folder);
    gc_status status = GC_OK;
    if (!dir && errno != ENOENT) /* no folder yet: nothing was written there */
        status = io_error(folder, "list it for leftover temporaries");
    for (struct dirent *entry; dir && status == GC_OK && (entry = readdir(dir));) {
        long pid = temporary_owner(entry->d_name, name);
        if (!pid || !process_gone(pid)) continue;
        int length = snprintf(NULL, 0, "%s/%s", folder, entry->d_name);
        char *leftover = malloc((size_t)length + 1);
        if (!leftover) gc_fatal("files: out of host memory");
        snprintf(leftover, (size_t)length + 1, "%s/%s", folder, entry->d_name);
        status = gc_folder_remove(leftover); /* a file or a folder */
        if (status == GC_OK && removed) ++*removed;
        free(leftover);
    }
    if (dir) closedir(dir);
    free(folder);
    return status;
}
