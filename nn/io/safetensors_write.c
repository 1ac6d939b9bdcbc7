/* Writing a safetensors file: a deterministic layout (the reference writer's), the checksum
 * of the tensor data in the metadata, and an atomic replacement of the destination
 * (gradcache/files.h), so that a crash or an error leaves the previous file as it was. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcache/files.h"
#include "gradcache/hash.h"
#include "nn/io/safetensors_internal.h"

/* A name (of a tensor or a metadata key) and where it came from. */
typedef struct named {
    const char *name;
    int index;      /* into the parameter list, or the metadata pair; CHECKSUM_INDEX for the checksum */
    gc_dtype dtype; /* a tensor's, for the layout order; unused for metadata */
} named;

/* The checksum's place among the metadata keys: its value is known only once the data is
 * written, so the header holds a placeholder of the same width, overwritten at the end. */
enum { CHECKSUM_INDEX = -1 };
static const char CHECKSUM_PLACEHOLDER[] = "0000000000000000"; /* GC_SAFETENSORS_CHECKSUM_DIGITS wide */

/* The reference writer sorts tensors by its dtype enum in reverse (F64 > F32 > I32 > BF16 >
 * F16 among ours), then by name: wider elements first keeps every tensor aligned. */
static int dtype_rank(gc_dtype dtype) {
    switch (dtype) {
    case GC_F64: return 0;
    case GC_F32: return 1;
    case GC_I32: return 2;
    case GC_BF16: return 3;
    default: return 4; /* GC_F16 */
    }
}

static int compare_names(const void *a, const void *b) {
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static int compare_layout(const void *a, const void *b) {
    const named *x = a, *y = b;
    int by_dtype = dtype_rank(x->dtype) - dtype_rank(y->dtype);
    return by_dtype ? by_dtype : compare_names(a, b);
}

/* Sorts `items` by name; a repeated or malformed name is a programmer error. */
static void sort_unique(named *items, int count, const char *what) {
    qsort(items, (size_t)count, sizeof *items, compare_names);
    for (int i = 0; i < count; i++) {
        if (!gc_json_utf8_valid(items[i].name, strlen(items[i].name)))
            gc_fatal("safetensors_save: %s '%s' is not valid UTF-8", what, items[i].name);
        if (i > 0 && strcmp(items[i - 1].name, items[i].name) == 0)
            gc_fatal("safetensors_save: %s '%s' appears twice", what, items[i].name);
    }
}

static int metadata_pairs(const char *const *metadata) {
    int count = 0;
    while (metadata && metadata[2 * count]) {
        if (!metadata[2 * count + 1]) gc_fatal("safetensors_save: metadata key '%s' has no value", metadata[2 * count]);
        if (!strcmp(metadata[2 * count], GC_SAFETENSORS_CHECKSUM_KEY))
            gc_fatal("safetensors_save: metadata key '%s' is reserved for the checksum the writer computes",
                     GC_SAFETENSORS_CHECKSUM_KEY);
        if (!gc_json_utf8_valid(metadata[2 * count + 1], strlen(metadata[2 * count + 1])))
            gc_fatal("safetensors_save: the value of metadata key '%s' is not valid UTF-8", metadata[2 * count]);
        count++;
    }
    return count;
}

static void append_literal(gc_json_text *text, const char *literal) { gc_json_append(text, literal, strlen(literal)); }

/* The header for the tensors in `order` and the metadata pairs in `keys` order, padded
 * with spaces to a multiple of 8 bytes as the reference does (the data then starts
 * aligned). *checksum_at receives the header offset of the checksum's placeholder digits
 * (0 when there is none: the header's first byte is '{'). */
static void build_header(gc_json_text *text, const gc_param_list *tensors, const named *order,
                         const char *const *metadata, const named *keys, int key_count, size_t *checksum_at) {
    *checksum_at = 0;
    append_literal(text, "{");
    if (key_count > 0) {
        append_literal(text, "\"__metadata__\":{");
        for (int i = 0; i < key_count; i++) {
            if (i > 0) append_literal(text, ",");
            gc_json_append_string(text, keys[i].name);
            append_literal(text, ":");
            if (keys[i].index == CHECKSUM_INDEX) *checksum_at = text->length + 1; /* past the opening quote */
            gc_json_append_string(text, keys[i].index == CHECKSUM_INDEX ? CHECKSUM_PLACEHOLDER
                                                                        : metadata[2 * keys[i].index + 1]);
        }
        append_literal(text, tensors->count > 0 ? "}," : "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < tensors->count; i++) {
        const gc_tensor *tensor = tensors->items[order[i].index].tensor;
        if (i > 0) append_literal(text, ",");
        gc_json_append_string(text, order[i].name);
        append_literal(text, ":{\"dtype\":\"");
        append_literal(text, gc_safetensors_dtype_name(tensor->dtype));
        append_literal(text, "\",\"shape\":[");
        for (int d = 0; d < tensor->ndim; d++) {
            if (d > 0) append_literal(text, ",");
            gc_json_append_integer(text, tensor->shape[d]);
        }
        append_literal(text, "],\"data_offsets\":[");
        gc_json_append_integer(text, (int64_t)offset);
        append_literal(text, ",");
        offset += gc_nbytes(tensor);
        gc_json_append_integer(text, (int64_t)offset);
        append_literal(text, "]}");
    }
    append_literal(text, "}");
    while (!text->failed && text->length % 8 != 0) append_literal(text, " ");
}

static bool write_all(FILE *out, const void *bytes, size_t size) {
    return size == 0 || fwrite(bytes, 1, size, out) == size;
}

/* The whole file into `out`, the checksum of the data written over its placeholder (at
 * header offset checksum_at, when not 0); false with errno set on failure. */
static bool write_file(FILE *out, const gc_json_text *header, size_t checksum_at, const gc_param_list *tensors,
                       const named *order, void *staging) {
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)((uint64_t)header->length >> (8 * i));
    if (!write_all(out, prefix, sizeof prefix) || !write_all(out, header->bytes, header->length)) return false;
    gc_xxh64 checksum;
    gc_xxh64_begin(&checksum);
    for (int i = 0; i < tensors->count; i++) {
        const gc_tensor *tensor = tensors->items[order[i].index].tensor;
        gc_copy_to_host(tensor, staging); /* a GPU tensor too */
        gc_xxh64_update(&checksum, staging, gc_nbytes(tensor));
        if (!write_all(out, staging, gc_nbytes(tensor))) return false;
    }
    if (checksum_at) {
        char digits[GC_SAFETENSORS_CHECKSUM_DIGITS + 1];
        snprintf(digits, sizeof digits, "%016" PRIx64, gc_xxh64_end(&checksum));
        if (fseek(out, (long)(8 + checksum_at), SEEK_SET) != 0 || !write_all(out, digits, sizeof digits - 1))
            return false;
    }
    return true;
}

static gc_status write_atomically(const char *path, const gc_json_text *header, size_t checksum_at,
                                  const gc_param_list *tensors, const named *order, void *staging) {
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status != GC_OK) return status;
    if (!write_file(writer.file, header, checksum_at, tensors, order, staging)) {
        gc_set_error(GC_ERR_IO, "safetensors: %s: cannot write it: %s", path, strerror(errno));
        gc_file_abort(&writer);
        return GC_ERR_IO;
    }
    return gc_file_commit(&writer);
}

/* Fills order[i] for every tensor (stopping the program on a malformed entry); returns the
 * largest tensor's byte count, at least 1, which is the staging buffer's size. */
static size_t list_tensors(const gc_param_list *tensors, named *order) {
    size_t largest = 1;
    for (int i = 0; i < tensors->count; i++) {
        const gc_param *param = &tensors->items[i];
        if (!param->tensor) gc_fatal("safetensors_save: tensor '%s' is NULL", param->name);
        if (!param->name[0]) gc_fatal("safetensors_save: a tensor has an empty name");
        if (!strcmp(param->name, "__metadata__")) gc_fatal("safetensors_save: '__metadata__' cannot name a tensor");
        order[i] = (named){param->name, i, param->tensor->dtype};
        if (gc_nbytes(param->tensor) > largest) largest = gc_nbytes(param->tensor);
    }
    return largest;
}

static gc_status save(const char *path, const gc_param_list *tensors, const char *const *metadata, bool checksum) {
    int pairs = metadata_pairs(metadata), key_count = pairs + (checksum ? 1 : 0);
    named *order = malloc((size_t)(tensors->count + key_count + 1) * sizeof *order);
    size_t largest = order ? list_tensors(tensors, order) : 1;
    void *staging = order ? malloc(largest) : NULL;
    if (!staging) {
        free(order);
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory to stage %zu bytes", path, largest);
        return GC_ERR_OUT_OF_MEMORY;
    }
    named *keys = order + tensors->count;
    for (int i = 0; i < pairs; i++) keys[i] = (named){metadata[2 * i], i, GC_F32};
    if (checksum) keys[pairs] = (named){GC_SAFETENSORS_CHECKSUM_KEY, CHECKSUM_INDEX, GC_F32};
    sort_unique(order, tensors->count, "tensor name");
    sort_unique(keys, key_count, "metadata key");
    qsort(order, (size_t)tensors->count, sizeof *order, compare_layout);

    gc_json_text header = {0};
    size_t checksum_at;
    build_header(&header, tensors, order, metadata, keys, key_count, &checksum_at);
    gc_status status;
    if (header.failed) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory for the header", path);
        status = GC_ERR_OUT_OF_MEMORY;
    } else if (header.length > GC_SAFETENSORS_MAX_HEADER) {
        status = gc_safetensors_format_error(path, "the header would take %zu bytes, more than the limit of %u",
                                             header.length, GC_SAFETENSORS_MAX_HEADER);
    } else {
        status = write_atomically(path, &header, checksum_at, tensors, order, staging);
    }
    gc_json_text_free(&header);
    free(staging);
    free(order);
    return status;
}

gc_status gc_safetensors_save(const char *path, const gc_param_list *tensors, const char *const *metadata) {
    return save(path, tensors, metadata, true);
}

gc_status gc_safetensors_save_plain(const char *path, const gc_param_list *tensors, const char *const *metadata) {
    return save(path, tensors, metadata, false);
}
