/* The scratch folders of model fetch (see fetch_scratch.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fetch_scratch.h"
#include "paths.h"

#define TAG ".fetch-"

char *gc_fetch_scratch_new(const char *out) {
    int length = snprintf(NULL, 0, "%s" TAG "%ld-XXXXXX", out, (long)getpid());
    char *path = malloc((size_t)length + 1);
    if (!path) gc_fatal("model fetch: out of host memory");
    snprintf(path, (size_t)length + 1, "%s" TAG "%ld-XXXXXX", out, (long)getpid());
    if (mkdtemp(path)) return path;
    gc_set_error(GC_ERR_IO, "cannot create a scratch folder next to %s: %s", out, strerror(errno));
    free(path);
    return NULL;
}

/* The fetch's process id when `entry` is a scratch folder of the model folder named `name`
 * ("<name>.fetch-<pid>-XXXXXX"), else 0. */
static long scratch_owner(const char *entry, const char *name) {
    size_t length = strlen(name);
    if (strncmp(entry, name, length) != 0 || strncmp(entry + length, TAG, strlen(TAG)) != 0) return 0;
    const char *c = entry + length + strlen(TAG);
    long pid = 0;
    for (; *c >= '0' && *c <= '9' && pid <= 99999999; c++) pid = pid * 10 + (*c - '0'); /* pids are far smaller */
    return *c == '-' && strlen(c + 1) == 6 ? pid : 0;
}

/* No process has id `pid` (signal 0 only checks; a process that is not ours, EPERM, runs).
 * Ours is this fetch, which has not made its folder yet: one of that id is a leftover of an
 * earlier process that had it. */
static bool fetch_gone(long pid) {
    return pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

static int remove_entry(const char *path, const struct stat *info, int kind, struct FTW *where) {
    (void)info, (void)kind, (void)where;
    if (remove(path) == 0 || errno == ENOENT) return 0;
    gc_set_error(GC_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    return 1;
}

gc_status gc_fetch_scratch_remove(const char *path) {
    /* depth first (a folder after what it holds), links removed rather than followed */
    int result = nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (result == 0 || (result < 0 && errno == ENOENT)) return GC_OK;
    if (result < 0) gc_set_error(GC_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    return GC_ERR_IO;
}

gc_status gc_fetch_scratch_remove_stale(const char *out, int *removed) {
    *removed = 0;
    const char *slash = strrchr(out, '/');
    const char *name = slash ? slash + 1 : out;
    char *folder = gc_path_parent(out);
    DIR *dir = opendir(folder);
    gc_status status = GC_OK;
    if (!dir) {
        gc_set_error(GC_ERR_IO, "cannot list %s for the scratch folders of fetches that did not finish: %s", folder,
                     strerror(errno));
        status = GC_ERR_IO;
    }
    for (struct dirent *entry; dir && status == GC_OK && (entry = readdir(dir));) {
        long pid = scratch_owner(entry->d_name, name);
        if (!pid || !fetch_gone(pid)) continue;
        char *path = gc_path_join(folder, entry->d_name);
        status = gc_fetch_scratch_remove(path);
        if (status == GC_OK) ++*removed;
        free(path);
    }
    if (dir) closedir(dir);
    free(folder);
    return status;
}
