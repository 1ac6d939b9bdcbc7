/* The paths of datasets and run folders (see gradcache/train.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/train.h"

char *gc_path_join(const char *dir, const char *name) {
    size_t length = strlen(dir) + 1 + strlen(name) + 1;
    char *path = malloc(length);
    if (!path) gc_fatal("path_join: out of host memory");
    snprintf(path, length, "%s/%s", dir, name);
    return path;
}

char *gc_path_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!parent) gc_fatal("path_parent: out of host memory");
    return parent;
}

static bool is_directory(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

static char *copy_path(const char *path) {
    char *copy = strdup(path);
    if (!copy) gc_fatal("paths: out of host memory");
    return copy;
}

char *gc_data_path(const char *path, const char *split) {
    if (!is_directory(path)) return copy_path(path);
    size_t length = strlen(split) + sizeof ".tsv";
    char *name = malloc(length);
    if (!name) gc_fatal("data_path: out of host memory");
    snprintf(name, length, "%s.tsv", split);
    char *joined = gc_path_join(path, name);
    free(name);
    return joined;
}

char *gc_run_file(const char *path, const char *name) {
    return is_directory(path) ? gc_path_join(path, name) : copy_path(path);
}

gc_status gc_make_directories(const char *path) {
    char *partial = copy_path(path);
    gc_status status = GC_OK;
    /* each prefix ending before a '/', then the whole path */
    for (char *p = partial + 1; status == GC_OK; p++) {
        bool end = *p == '\0';
        if (*p != '/' && !end) continue;
        *p = '\0';
        int error = mkdir(partial, 0777) == 0 ? 0 : errno;
        if (error && (error != EEXIST || !is_directory(partial))) {
            gc_set_error(GC_ERR_IO, "cannot create the folder %s: %s", partial,
                         error == EEXIST ? "a file has that name" : strerror(error));
            status = GC_ERR_IO;
        }
        if (end) break;
        *p = '/';
    }
    free(partial);
    return status;
}
