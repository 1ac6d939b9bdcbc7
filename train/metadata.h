/* Safetensors metadata (a map of strings) written from and read back into typed values: the
 * trainer's checkpoints and model files describe themselves with it. */
#ifndef GC_TRAIN_METADATA_H
#define GC_TRAIN_METADATA_H

#include <stdint.h>

#include "gradcache/checkpoint.h"

typedef struct gc_metadata {
    char **entries; /* {key, value, key, value, ..., NULL}, as gc_safetensors_save takes them */
    int count;      /* strings in use, NULL excluded (two per key) */
    int capacity;
} gc_metadata;

/* Sets key to the printf-formatted value (replacing an earlier value of the same key). */
void gc_metadata_set(gc_metadata *metadata, const char *key, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The value of key, or NULL. */
const char *gc_metadata_get(const gc_metadata *metadata, const char *key);
/* For gc_safetensors_save. */
const char *const *gc_metadata_entries(const gc_metadata *metadata);
void gc_metadata_free(gc_metadata *metadata);

/* A file's value of key as a string, an integer in [min, max], an unsigned 64-bit integer or
 * a finite number: GC_ERR_FORMAT naming `path` and the key when it is missing or malformed. */
gc_status gc_metadata_read_string(const gc_safetensors *file, const char *path, const char *key, const char **value);
gc_status gc_metadata_read_int(const gc_safetensors *file, const char *path, const char *key, int64_t min, int64_t max,
                               int64_t *value);
gc_status gc_metadata_read_u64(const gc_safetensors *file, const char *path, const char *key, uint64_t *value);
gc_status gc_metadata_read_double(const gc_safetensors *file, const char *path, const char *key, double *value);

#endif
