/* The writer's temporary files: where a save writes before it renames, and the removal of
 * those a killed writer left behind.
 *
 * A save writes "<folder>/.<name>.tmp.<pid>": next to the destination, so that the rename
 * stays within one file system (atomic); hidden, so that a crash leaves nothing that looks
 * like a result; named by the writer's process, so that a later run can tell a leftover
 * (its process is gone) from a file being written right now. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "nn/io/safetensors_internal.h"

char *gc_safetensors_folder_of(const char *path, const char **name) {
    const char *slash = strrchr(path, '/');
    if (name) *name = slash ? slash + 1 : path;
    return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

char *gc_safetensors_temporary_path(const char *path) {
    const char *slash = strrchr(path, '/');
    int folder = slash ? (int)(slash - path + 1) : 0;
    long pid = (long)getpid();
    int length = snprintf(NULL, 0, "%.*s.%s.tmp.%ld", folder, path, path + folder, pid);
    char *temporary = malloc((size_t)length + 1);
    if (temporary) snprintf(temporary, (size_t)length + 1, "%.*s.%s.tmp.%ld", folder, path, path + folder, pid);
    return temporary;
}

/* The writer's process id when `entry` is a temporary of `name`: ".<name>.tmp.<pid>", or
 * "<name>.tmp.<pid>" as versions before the hidden names wrote them; else 0. */
static long temporary_owner(const char *entry, const char *name) {
    size_t length = strlen(name);
    if (entry[0] == '.' && strncmp(entry + 1, name, length) == 0 && strncmp(entry + 1 + length, ".tmp.", 5) == 0)
        entry++; /* the hidden form */
    if (strncmp(entry, name, length) != 0 || strncmp(entry + length, ".tmp.", 5) != 0) return 0;
    const char *digits = entry + length + 5;
    long pid = 0;
    for (const char *c = digits; *c; c++) {
        if (*c < '0' || *c > '9' || pid > 99999999) return 0; /* pids are far smaller */
        pid = pid * 10 + (*c - '0');
    }
    return digits[0] ? pid : 0;
}

/* True when no process has id `pid` (kill with signal 0 only checks). A process that exists
 * but is not ours (EPERM) is alive. */
static bool process_gone(long pid) {
    return pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

gc_status gc_safetensors_remove_stale_temporaries(const char *path, int *removed) {
    const char *name;
    char *folder = gc_safetensors_folder_of(path, &name);
    if (removed) *removed = 0;
    if (!folder) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory for the folder's name", path);
        return GC_ERR_OUT_OF_MEMORY;
    }
    DIR *dir = opendir(folder);
    gc_status status = GC_OK;
    if (!dir && errno != ENOENT) { /* no folder yet: nothing was written there */
        gc_set_error(GC_ERR_IO, "safetensors: %s: cannot list the folder for leftover temporary files: %s", path,
                     strerror(errno));
        status = GC_ERR_IO;
    }
    for (struct dirent *entry; dir && status == GC_OK && (entry = readdir(dir));) {
        long pid = temporary_owner(entry->d_name, name);
        if (!pid || !process_gone(pid)) continue;
        int length = snprintf(NULL, 0, "%s/%s", folder, entry->d_name);
        char *leftover = malloc((size_t)length + 1);
        if (!leftover) {
            gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory", path);
            status = GC_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(leftover, (size_t)length + 1, "%s/%s", folder, entry->d_name);
        if (unlink(leftover) == 0) {
            if (removed) ++*removed;
        } else if (errno != ENOENT) { /* ENOENT: another run removed it first */
            gc_set_error(GC_ERR_IO, "safetensors: %s: cannot remove the leftover temporary file: %s", leftover,
                         strerror(errno));
            status = GC_ERR_IO;
        }
        free(leftover);
    }
    if (dir) closedir(dir);
    free(folder);
    return status;
}
