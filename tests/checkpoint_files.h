/* Test helpers for the checkpoint tests: a scratch folder, and whole files as bytes. */
#ifndef GC_TESTS_CHECKPOINT_FILES_H
#define GC_TESTS_CHECKPOINT_FILES_H

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/checkpoint.h"

/* A new empty folder under /tmp; the test removes what it creates and ends with
 * gc_test_remove_folder, which fails if anything (a stray temporary file) is left. */
static inline void gc_test_make_folder(char folder[PATH_MAX]) {
    snprintf(folder, PATH_MAX, "/tmp/gc_checkpoint_XXXXXX");
    REQUIRE(mkdtemp(folder));
}

static inline void gc_test_remove_folder(const char *folder) {
    int removed = rmdir(folder);
    CHECK_MSG(removed == 0, "%s is not empty or cannot be removed", folder);
}

/* folder/name into out. */
static inline const char *gc_test_path(char out[PATH_MAX], const char *folder, const char *name) {
    REQUIRE(snprintf(out, PATH_MAX, "%s/%s", folder, name) < PATH_MAX);
    return out;
}

static inline void gc_test_write_bytes(const char *path, const void *bytes, size_t size) {
    FILE *out = fopen(path, "wb");
    REQUIRE(out);
    REQUIRE(fwrite(bytes, 1, size, out) == size);
    REQUIRE(fclose(out) == 0);
}

/* The whole file in a new buffer (free it); NULL if it cannot be read. */
static inline unsigned char *gc_test_read_bytes(const char *path, size_t *size) {
    FILE *in = fopen(path, "rb");
    if (!in) return NULL;
    unsigned char *bytes = NULL;
    *size = 0;
    for (size_t capacity = 0;;) {
        if (*size == capacity) {
            capacity = capacity ? 2 * capacity : 4096;
            bytes = realloc(bytes, capacity);
            REQUIRE(bytes);
        }
        size_t got = fread(bytes + *size, 1, capacity - *size, in);
        if (got == 0) break;
        *size += got;
    }
    fclose(in);
    return bytes;
}

/* Whether the files at a and b can be read and hold the same bytes. */
static inline bool gc_test_same_file_bytes(const char *a, const char *b) {
    size_t size_a = 0, size_b = 0;
    unsigned char *bytes_a = gc_test_read_bytes(a, &size_a), *bytes_b = gc_test_read_bytes(b, &size_b);
    bool same = bytes_a && bytes_b && size_a == size_b && memcmp(bytes_a, bytes_b, size_a) == 0;
    free(bytes_a);
    free(bytes_b);
    return same;
}

/* Number of entries in `folder` other than . and .. */
static inline int gc_test_folder_entries(const char *folder) {
    DIR *dir = opendir(folder);
    REQUIRE(dir);
    int count = 0;
    for (struct dirent *entry; (entry = readdir(dir));)
        count += strcmp(entry->d_name, ".") && strcmp(entry->d_name, "..");
    closedir(dir);
    return count;
}

/* The first entry of `folder` whose name begins with `prefix`, as a path into path[PATH_MAX];
 * NULL when there is none. */
static inline const char *gc_test_find_entry(char *path, const char *folder, const char *prefix) {
    DIR *dir = opendir(folder);
    REQUIRE(dir);
    const char *found = NULL;
    for (struct dirent *entry; !found && (entry = readdir(dir));)
        if (strncmp(entry->d_name, prefix, strlen(prefix)) == 0) found = gc_test_path(path, folder, entry->d_name);
    closedir(dir);
    return found;
}

/* The status is GC_ERR_FORMAT and the message names `file` and contains `problem`. */
static inline void gc_test_expect_format_error(gc_status status, const char *file, const char *problem,
                                               const char *what) {
    const char *message = gc_last_error();
    CHECK_MSG(status == GC_ERR_FORMAT && strstr(message, file) && strstr(message, problem),
              "%s: got status %s and \"%s\"; want a format error naming %s and \"%s\"", what, gc_status_name(status),
              message, file, problem);
}

#endif
