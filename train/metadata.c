/* Safetensors metadata as typed values (see metadata.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata.h"

static char *copy_string(const char *text) {
    char *copy = malloc(strlen(text) + 1);
    if (!copy) gc_fatal("metadata: out of host memory");
    return strcpy(copy, text);
}

void gc_metadata_set(gc_metadata *metadata, const char *key, const char *format, ...) {
    char value[512];
    va_list args;
    va_start(args, format);
    int length = vsnprintf(value, sizeof value, format, args);
    va_end(args);
    if (length < 0 || (size_t)length >= sizeof value) gc_fatal("metadata: the value of '%s' is too long", key);
    for (int i = 0; i < metadata->count; i += 2) {
        if (strcmp(metadata->entries[i], key) == 0) {
            free(metadata->entries[i + 1]);
            metadata->entries[i + 1] = copy_string(value);
            return;
        }
    }
    if (metadata->count + 3 > metadata->capacity) {
        int capacity = metadata->capacity ? 2 * metadata->capacity : 32;
        char **entries = realloc(metadata->entries, (size_t)capacity * sizeof *entries);
        if (!entries) gc_fatal("metadata: out of host memory");
        metadata->entries = entries;
        metadata->capacity = capacity;
    }
    metadata->entries[metadata->count++] = copy_string(key);
    metadata->entries[metadata->count++] = copy_string(value);
    metadata->entries[metadata->count] = NULL;
}

const char *gc_metadata_get(const gc_metadata *metadata, const char *key) {
    for (int i = 0; i < metadata->count; i += 2)
        if (strcmp(metadata->entries[i], key) == 0) return metadata->entries[i + 1];
    return NULL;
}

const char *const *gc_metadata_entries(const gc_metadata *metadata) {
    return (const char *const *)metadata->entries;
}

void gc_metadata_free(gc_metadata *metadata) {
    for (int i = 0; i < metadata->count; i++) free(metadata->entries[i]);
    free(metadata->entries);
    *metadata = (gc_metadata){0};
}

static gc_status malformed(const char *path, const char *key, const char *value, const char *expected) {
    gc_set_error(GC_ERR_FORMAT, "%s: metadata '%s' is '%s', expected %s", path, key, value, expected);
    return GC_ERR_FORMAT;
}

gc_status gc_metadata_read_string(const gc_safetensors *file, const char *path, const char *key, const char **value) {
    *value = gc_safetensors_metadata(file, key);
    if (*value) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: no metadata '%s' (not a file written by gradcache train)", path, key);
    return GC_ERR_FORMAT;
}

gc_status gc_metadata_read_int(const gc_safetensors *file, const char *path, const char *key, int64_t min, int64_t max,
                               int64_t *value) {
    const char *text;
    gc_status status = gc_metadata_read_string(file, path, key, &text);
    if (status != GC_OK) return status;
    char *end;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno || end == text || *end || parsed < min || parsed > max) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", (long long)min, (long long)max);
        return malformed(path, key, text, expected);
    }
    *value = parsed;
    return GC_OK;
}

gc_status gc_metadata_read_u64(const gc_safetensors *file, const char *path, const char *key, uint64_t *value) {
    const char *text;
    gc_status status = gc_metadata_read_string(file, path, key, &text);
    if (status != GC_OK) return status;
    char *end;
    errno = 0;
    unsigned long long parsed = strtoull(text, &end, 10);
    /* strtoull accepts a sign ("-1" is 2^64 - 1): only plain digits are a value written here */
    if (errno || end == text || *end || text[0] < '0' || text[0] > '9')
        return malformed(path, key, text, "an unsigned 64-bit integer");
    *value = parsed;
    return GC_OK;
}

gc_status gc_metadata_read_double(const gc_safetensors *file, const char *path, const char *key, double *value) {
    const char *text;
    gc_status status = gc_metadata_read_string(file, path, key, &text);
    if (status != GC_OK) return status;
    char *end;
    errno = 0;
    double parsed = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(parsed)) return malformed(path, key, text, "a finite number");
    *value = parsed;
    return GC_OK;
}
