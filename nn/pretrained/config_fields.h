/* Reading the fields of a model's config.json (outside input): each value checked for its
 * type and range, and refused in one line naming the file, the field and the value. Shared by
 * the families' readers (bert_config.c, decoder_config.c) and the folder's other files
 * (pretrained_folder.c). */
#ifndef GC_NN_CONFIG_FIELDS_H
#define GC_NN_CONFIG_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/error.h"
#include "base/json.h"

/* Far beyond any model's sizes; bounds what a foreign file can make us allocate. */
#define GC_CONFIG_MAX_SIZE 1000000

/* The integer `key` in [min, max] into *value; absent: an error, or `otherwise` with the _or form. */
gc_status gc_config_size(const char *path, const gc_json *config, const char *key, int64_t min, int64_t max,
                         int64_t *value);
gc_status gc_config_size_or(const char *path, const gc_json *config, const char *key, int64_t min, int64_t max,
                            int64_t otherwise, int64_t *value);
/* A number `key` in [min, max), or `otherwise` when absent. */
gc_status gc_config_number(const char *path, const gc_json *config, const char *key, double min, double max,
                           double otherwise, double *value);
/* A string `key` that must be one of `allowed` (NULL-terminated), or `otherwise` when absent
 * (null counts as absent); *index is its position. */
gc_status gc_config_choice(const char *path, const gc_json *config, const char *key, const char *const *allowed,
                           int otherwise, int *index);
/* true or false, or `otherwise` when absent or null. */
gc_status gc_config_flag(const char *path, const gc_json *config, const char *key, bool otherwise, bool *value);

#endif
