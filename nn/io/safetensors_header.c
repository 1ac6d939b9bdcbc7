/* The check of a safetensors header: every entry well-formed, of a supported dtype, with a
 * shape that matches its byte range, and the byte ranges covering the data buffer exactly,
 * in some order, without overlaps or holes. The last rule is the reference
 * implementation's (it rejects a file with unused bytes), and it is what makes the file
 * mean one thing: no bytes hide between tensors. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/json_file.h"
#include "nn/io/safetensors_internal.h"

/* Objects nest only three deep in a valid header (file, entry, shape); a little slack
 * lets a deeper structure reach the clearer "is not ..." messages below. */
#define HEADER_MAX_DEPTH 8
/* Names shown in messages are cut here, so that a hostile name cannot crowd out the rest. */
#define SHOWN 80

gc_status gc_safetensors_format_error(const char *name, const char *fmt, ...) {
    char where[4096 + sizeof "safetensors: "]; /* a path of any length Linux allows */
    snprintf(where, sizeof where, "safetensors: %s", name);
    va_list args;
    va_start(args, fmt);
    gc_status status = gc_json_file_verror(where, fmt, args);
    va_end(args);
    return status;
}

static gc_status no_memory(const char *name, const char *what) {
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory for %s", name, what);
    return GC_ERR_OUT_OF_MEMORY;
}

static bool all_integers(const gc_json *array) {
    for (const gc_json *item = array->first; item; item = item->next)
        if (item->type != GC_JSON_INTEGER) return false;
    return true;
}

/* The entry's field `key` if the entry has it with the given type; NULL after recording a
 * message otherwise. */
static const gc_json *field(const char *file, const gc_json *entry, const char *key, gc_json_type type,
                            const char *expected) {
    for (const gc_json *member = entry->first; member; member = member->next)
        if (strcmp(member->key, key) == 0) {
            if (member->type == type && (type != GC_JSON_ARRAY || all_integers(member))) return member;
            gc_safetensors_format_error(file, "tensor '%.*s': \"%s\" is not %s", SHOWN, entry->key, key, expected);
            return NULL;
        }
    gc_safetensors_format_error(file, "tensor '%.*s': missing field \"%s\"", SHOWN, entry->key, key);
    return NULL;
}

/* The byte count of the shape's elements, or false when it passes 2^63 - 1 (multiplied in
 * order, as the reference does, so that no partial product overflows either). */
static bool shape_bytes(const gc_safetensors_entry *entry, uint64_t *bytes) {
    uint64_t total = entry->element_size;
    for (int i = 0; i < entry->ndim; i++) {
        uint64_t dim = (uint64_t)entry->shape[i];
        if (dim != 0 && total > (uint64_t)INT64_MAX / dim) return false;
        total *= dim;
    }
    *bytes = total;
    return true;
}

static gc_status read_entry(const char *file, const gc_json *member, uint64_t data_size, gc_safetensors_entry *entry) {
    const char *name = member->key;
    if (name[0] == '\0') return gc_safetensors_format_error(file, "a tensor has an empty name");
    if (member->type != GC_JSON_OBJECT)
        return gc_safetensors_format_error(file, "tensor '%.*s' is not an object", SHOWN, name);
    for (const gc_json *f = member->first; f; f = f->next)
        if (strcmp(f->key, "dtype") && strcmp(f->key, "shape") && strcmp(f->key, "data_offsets"))
            return gc_safetensors_format_error(file, "tensor '%.*s': unknown field \"%.*s\"", SHOWN, name, SHOWN, f->key);
    const gc_json *dtype = field(file, member, "dtype", GC_JSON_STRING, "a string");
    const gc_json *shape = dtype ? field(file, member, "shape", GC_JSON_ARRAY, "an array of integers") : NULL;
    const gc_json *offsets = shape ? field(file, member, "data_offsets", GC_JSON_ARRAY, "an array of integers") : NULL;
    if (!offsets) return GC_ERR_FORMAT;

    *entry = (gc_safetensors_entry){.name = name, .dtype_name = dtype->string};
    if (gc_safetensors_dtype_parse(dtype->string, &entry->dtype)) {
        entry->element_size = (unsigned)gc_dtype_size(entry->dtype);
    } else if ((entry->element_size = gc_safetensors_foreign_dtype_size(dtype->string))) {
        entry->foreign = true; /* listed and checked like any entry; gc_safetensors_get refuses it */
    } else {
        return gc_safetensors_format_error(file, "tensor '%.*s': unknown dtype \"%.*s\"", SHOWN, name, SHOWN,
                                           dtype->string);
    }
    if (shape->count > GC_MAX_DIMS)
        return gc_safetensors_format_error(file, "tensor '%.*s' has %d dims, more than the %d supported", SHOWN, name,
                                           shape->count, GC_MAX_DIMS);
    entry->ndim = shape->count;
    int dim = 0;
    for (const gc_json *size = shape->first; size; size = size->next) entry->shape[dim++] = size->integer;
    if (offsets->count != 2)
        return gc_safetensors_format_error(file, "tensor '%.*s': data_offsets has %d values, not [begin, end]", SHOWN,
                                           name, offsets->count);
    entry->begin = (uint64_t)offsets->first->integer;
    entry->end = (uint64_t)offsets->first->next->integer;

    char text[128];
    uint64_t bytes;
    if (entry->begin > entry->end)
        return gc_safetensors_format_error(file, "tensor '%.*s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                                           SHOWN, name, entry->begin, entry->end);
    if (entry->end > data_size)
        return gc_safetensors_format_error(file, "tensor '%.*s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the "
                                           "%" PRIu64 "-byte data", SHOWN, name, entry->begin, entry->end, data_size);
    if (!shape_bytes(entry, &bytes))
        return gc_safetensors_format_error(file, "tensor '%.*s': shape %s of %s overflows 64 bits", SHOWN, name,
                                           gc_shape_str(entry->ndim, entry->shape, text, sizeof text), dtype->string);
    if (bytes != entry->end - entry->begin)
        return gc_safetensors_format_error(file, "tensor '%.*s': shape %s of %s takes %" PRIu64 " bytes but data_offsets "
                                           "[%" PRIu64 ", %" PRIu64 "] hold %" PRIu64, SHOWN, name,
                                           gc_shape_str(entry->ndim, entry->shape, text, sizeof text), dtype->string,
                                           bytes, entry->begin, entry->end, entry->end - entry->begin);
    return GC_OK;
}

static gc_status read_metadata(gc_safetensors *file, const gc_json *object) {
    if (object->type != GC_JSON_OBJECT) return gc_safetensors_format_error(file->name, "__metadata__ is not an object");
    file->metadata = malloc((size_t)(object->count ? object->count : 1) * sizeof *file->metadata);
    if (!file->metadata) return no_memory(file->name, "the metadata");
    for (const gc_json *value = object->first; value; value = value->next) {
        if (value->type != GC_JSON_STRING)
            return gc_safetensors_format_error(file->name, "metadata \"%.*s\" is not a string", SHOWN, value->key);
        if (strcmp(value->key, GC_SAFETENSORS_CHECKSUM_KEY) == 0) file->checksum = value->string; /* checked on open */
        else file->metadata[file->metadata_count++] = value;
    }
    return GC_OK;
}

static int compare_by_offsets(const void *a, const void *b) {
    const gc_safetensors_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name); /* ties only in a file about to be rejected: a stable message */
}

static int compare_by_name(const void *a, const void *b) {
    return strcmp(((const gc_safetensors_entry *)a)->name, ((const gc_safetensors_entry *)b)->name);
}

static int compare_by_key(const void *a, const void *b) {
    return strcmp((*(const gc_json *const *)a)->key, (*(const gc_json *const *)b)->key);
}

static gc_status uncovered(const gc_safetensors *file, uint64_t begin, uint64_t end) {
    return gc_safetensors_format_error(file->name, "bytes [%" PRIu64 ", %" PRIu64 ") of the data belong to no tensor "
                                       "(the tensors must cover the data exactly)", begin, end);
}

/* The entries (sorted by offsets here) must tile [0, data_size). */
static gc_status check_coverage(const gc_safetensors *file) {
    uint64_t covered = 0;
    for (int i = 0; i < file->count; i++) {
        const gc_safetensors_entry *entry = &file->entries[i];
        if (entry->begin > covered) return uncovered(file, covered, entry->begin);
        if (entry->begin < covered) { /* so i > 0: covered is still 0 for the first entry */
            const gc_safetensors_entry *previous = &file->entries[i - 1];
            return gc_safetensors_format_error(file->name, "tensors '%.*s' [%" PRIu64 ", %" PRIu64 ") and '%.*s' [%" PRIu64
                                               ", %" PRIu64 ") overlap", SHOWN, previous->name, previous->begin,
                                               previous->end, SHOWN, entry->name, entry->begin, entry->end);
        }
        covered = entry->end;
    }
    return covered == file->data_size ? GC_OK : uncovered(file, covered, file->data_size);
}

static gc_status read_header(gc_safetensors *file, const char *text, size_t length) {
    if (length == 0 || text[0] != '{') return gc_safetensors_format_error(file->name, "the header does not start with '{'");
    gc_json_error error;
    if (!(file->header = gc_json_parse(text, length, HEADER_MAX_DEPTH, &error)))
        return gc_safetensors_format_error(file->name, "invalid JSON header at byte %zu: %s", error.position, error.message);
    const gc_json *top = file->header;
    file->entries = malloc((size_t)(top->count ? top->count : 1) * sizeof *file->entries);
    if (!file->entries) return no_memory(file->name, "the tensor list");
    for (const gc_json *member = top->first; member; member = member->next) {
        gc_status status = strcmp(member->key, "__metadata__") == 0
                               ? read_metadata(file, member)
                               : read_entry(file->name, member, file->data_size, &file->entries[file->count++]);
        if (status != GC_OK) return status;
    }
    qsort(file->entries, (size_t)file->count, sizeof *file->entries, compare_by_offsets);
    gc_status status = check_coverage(file);
    if (status != GC_OK) return status;
    qsort(file->entries, (size_t)file->count, sizeof *file->entries, compare_by_name);
    if (file->metadata) qsort(file->metadata, (size_t)file->metadata_count, sizeof *file->metadata, compare_by_key);
    return GC_OK;
}

gc_status gc_safetensors_parse_header(const char *name, const char *header, size_t length, uint64_t data_size,
                                      gc_safetensors **file) {
    *file = NULL;
    gc_safetensors *opened = calloc(1, sizeof *opened);
    if (!opened) return no_memory(name, "the file structure");
    opened->data_size = data_size;
    gc_status status = GC_OK;
    if (!(opened->name = strdup(name))) status = no_memory(name, "the file name");
    if (status == GC_OK) status = read_header(opened, header, length);
    if (status != GC_OK) {
        gc_safetensors_close(opened);
        return status;
    }
    *file = opened;
    return GC_OK;
}
