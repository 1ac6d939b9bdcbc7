/* Reading the fields of a model's config.json (nn/pretrained/config_fields.h). */
#include <stdio.h>
#include <string.h>

#include "base/json_file.h"
#include "nn/pretrained/config_fields.h"

/* config.json's integer `key` in [min, max] into *value. */
gc_status gc_config_size(const char *path, const gc_json *config, const char *key, int64_t min, int64_t max,
                         int64_t *value) {
    const gc_json *field = gc_json_member(config, key);
    if (!field) return gc_json_file_error(path, "no \"%s\"", key);
    if (field->type == GC_JSON_NUMBER)
        return gc_json_file_error(path, "\"%s\" is %g, not an integer in [%lld, %lld]", key, field->number,
                                  (long long)min, (long long)max);
    if (field->type != GC_JSON_INTEGER)
        return gc_json_file_error(path, "\"%s\" is %s, not an integer in [%lld, %lld]", key,
                                  gc_json_type_name(field->type), (long long)min, (long long)max);
    if (field->integer < min || field->integer > max)
        return gc_json_file_error(path, "\"%s\" is %lld, outside [%lld, %lld]", key, (long long)field->integer,
                                  (long long)min, (long long)max);
    *value = field->integer;
    return GC_OK;
}

/* A number `key` in [min, max), or `otherwise` when absent. */
gc_status gc_config_number(const char *path, const gc_json *config, const char *key, double min, double max,
                           double otherwise, double *value) {
    const gc_json *field = gc_json_member(config, key);
    *value = otherwise;
    if (!field) return GC_OK;
    if (field->type != GC_JSON_NUMBER && field->type != GC_JSON_INTEGER)
        return gc_json_file_error(path, "\"%s\" is %s, not a number in [%g, %g)", key,
                                  gc_json_type_name(field->type), min, max);
    if (!(field->number >= min && field->number < max))
        return gc_json_file_error(path, "\"%s\" is %g, outside [%g, %g)", key, field->number, min, max);
    *value = field->number;
    return GC_OK;
}

/* A string `key` that must be one of `allowed` (NULL-terminated), or `otherwise` when absent;
 * *index is its position. */
gc_status gc_config_choice(const char *path, const gc_json *config, const char *key, const char *const *allowed,
                           int otherwise, int *index) {
    const gc_json *field = gc_json_member(config, key);
    *index = otherwise;
    if (!field || field->type == GC_JSON_NULL) return GC_OK;
    for (int i = 0; field->type == GC_JSON_STRING && allowed[i]; i++)
        if (strcmp(field->string, allowed[i]) == 0) {
            *index = i;
            return GC_OK;
        }
    char list[160] = "";
    for (int i = 0; allowed[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "", allowed[i]);
    return gc_json_file_error(path, "\"%s\" is %s%.40s%s, not one of the supported %s", key,
                              field->type == GC_JSON_STRING ? "\"" : "",
                              field->type == GC_JSON_STRING ? field->string : gc_json_type_name(field->type),
                              field->type == GC_JSON_STRING ? "\"" : "", list);
}

gc_status gc_config_size_or(const char *path, const gc_json *config, const char *key, int64_t min, int64_t max,
                            int64_t otherwise, int64_t *value) {
    const gc_json *field = gc_json_member(config, key);
    *value = otherwise;
    return field && field->type != GC_JSON_NULL ? gc_config_size(path, config, key, min, max, value) : GC_OK;
}

gc_status gc_config_flag(const char *path, const gc_json *config, const char *key, bool otherwise, bool *value) {
    const gc_json *field = gc_json_member(config, key);
    *value = otherwise;
    if (!field || field->type == GC_JSON_NULL) return GC_OK;
    if (field->type != GC_JSON_BOOL)
        return gc_json_file_error(path, "\"%s\" is %s, not true or false", key, gc_json_type_name(field->type));
    *value = field->boolean;
    return GC_OK;
}
