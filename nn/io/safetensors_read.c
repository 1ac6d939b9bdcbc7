/* Opening a safetensors file (from disk or from memory) and reading its tensors and
 * metadata. Both openers check the 8-byte header length before allocating anything for
 * the header, then share the header check in safetensors_header.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gradcache/hash.h"
#include "nn/io/safetensors_internal.h"

static gc_status io_error(const char *path, const char *what) {
    gc_set_error(GC_ERR_IO, "safetensors: %s: %s: %s", path, what, strerror(errno));
    return GC_ERR_IO;
}

/* The header length from the file's first 8 bytes (`prefix`, read only when the file
 * has them), checked against the limit and against the file's `size`. */
static gc_status header_length(const char *name, uint64_t size, const unsigned char *prefix, uint64_t *length) {
    if (size < 8)
        return gc_safetensors_format_error(name, "truncated: %" PRIu64 " bytes, fewer than the 8 of the header length",
                                           size);
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--) value = value << 8 | prefix[i];
    if (value > GC_SAFETENSORS_MAX_HEADER)
        return gc_safetensors_format_error(name, "header of %" PRIu64 " bytes is larger than the limit of %u", value,
                                           GC_SAFETENSORS_MAX_HEADER);
    if (value > size - 8)
        return gc_safetensors_format_error(name, "truncated: the %" PRIu64 "-byte header runs past the end of the %" PRIu64
                                           "-byte file", value, size);
    *length = value;
    return GC_OK;
}

/* Exactly GC_SAFETENSORS_CHECKSUM_DIGITS lowercase hex digits, as the writer prints them. */
static bool parse_checksum(const char *digits, uint64_t *value) {
    if (strlen(digits) != GC_SAFETENSORS_CHECKSUM_DIGITS) return false;
    *value = 0;
    for (const char *c = digits; *c; c++) {
        int digit = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
        if (digit < 0) return false;
        *value = *value << 4 | (uint64_t)digit;
    }
    return true;
}

gc_status gc_safetensors_verify_checksum(const gc_safetensors *file) {
    if (!file->checksum) return GC_OK; /* written elsewhere: nothing to compare with */
    const char *digits = file->checksum;
    uint64_t stored;
    if (!parse_checksum(digits, &stored))
        return gc_safetensors_format_error(file->name, "metadata '%s' is not %d lowercase hex digits",
                                           GC_SAFETENSORS_CHECKSUM_KEY, GC_SAFETENSORS_CHECKSUM_DIGITS);
    gc_xxh64 state;
    gc_xxh64_begin(&state);
    gc_xxh64_update(&state, file->data, file->data_size);
    uint64_t computed = gc_xxh64_end(&state);
    if (computed != stored)
        return gc_safetensors_format_error(file->name, "the tensor data does not match its checksum (%s %s, the data "
                                           "hashes to %016" PRIx64 "): the file is corrupt",
                                           GC_SAFETENSORS_CHECKSUM_KEY, digits, computed);
    return GC_OK;
}

/* The data buffer, once the header has said how large it is (at most the file's size). */
static gc_status allocate_data(gc_safetensors *file) {
    if ((file->data = malloc(file->data_size ? file->data_size : 1))) return GC_OK;
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory for the data", file->name);
    return GC_ERR_OUT_OF_MEMORY;
}

gc_status gc_safetensors_open_memory(const void *data, size_t size, const char *name, gc_safetensors **file) {
    const unsigned char *bytes = data;
    uint64_t length = 0;
    *file = NULL;
    gc_status status = header_length(name, size, bytes, &length);
    if (status == GC_OK)
        status = gc_safetensors_parse_header(name, (const char *)bytes + 8, length, size - 8 - length, file);
    if (status == GC_OK) status = allocate_data(*file);
    if (status == GC_OK && (*file)->data_size) memcpy((*file)->data, bytes + 8 + length, (*file)->data_size);
    if (status == GC_OK) status = gc_safetensors_verify_checksum(*file);
    if (status != GC_OK) {
        gc_safetensors_close(*file);
        *file = NULL;
    }
    return status;
}

/* Reads exactly `size` bytes; a file that ends sooner changed since its size was taken. */
static gc_status read_exact(int fd, const char *path, void *buffer, uint64_t size) {
    for (uint64_t done = 0; done < size;) {
        ssize_t got = read(fd, (char *)buffer + done, size - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return io_error(path, "cannot read");
        if (got == 0) {
            gc_set_error(GC_ERR_IO, "safetensors: %s: the file ended early (did it change while being read?)", path);
            return GC_ERR_IO;
        }
        done += (uint64_t)got;
    }
    return GC_OK;
}

/* Opens `path`; the tensor data is read (and its checksum verified) only when `with_data`. */
static gc_status open_file(const char *path, bool with_data, gc_safetensors **file) {
    *file = NULL;
    /* O_NONBLOCK: opening a FIFO without a writer would wait forever; a regular file, the
     * only kind read (its size is what bounds the reading), ignores the flag. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return io_error(path, "cannot open");
    struct stat info;
    unsigned char prefix[8] = {0};
    uint64_t size = 0, length = 0;
    char *header = NULL;
    gc_status status = fstat(fd, &info) == 0 ? GC_OK : io_error(path, "cannot stat");
    if (status == GC_OK && !S_ISREG(info.st_mode)) {
        gc_set_error(GC_ERR_IO, "safetensors: %s: not a regular file (a folder, a device or a pipe)", path);
        status = GC_ERR_IO;
    }
    if (status == GC_OK) size = (uint64_t)info.st_size;
    if (status == GC_OK && size >= 8) status = read_exact(fd, path, prefix, 8);
    if (status == GC_OK) status = header_length(path, size, prefix, &length);
    if (status == GC_OK && !(header = malloc(length ? length : 1))) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "safetensors: %s: out of host memory for the header", path);
        status = GC_ERR_OUT_OF_MEMORY;
    }
    if (status == GC_OK) status = read_exact(fd, path, header, length);
    if (status == GC_OK) status = gc_safetensors_parse_header(path, header, length, size - 8 - length, file);
    if (status == GC_OK && with_data) status = allocate_data(*file);
    if (status == GC_OK && with_data) status = read_exact(fd, path, (*file)->data, (*file)->data_size);
    if (status == GC_OK && with_data) status = gc_safetensors_verify_checksum(*file);
    if (status != GC_OK) {
        gc_safetensors_close(*file);
        *file = NULL;
    }
    free(header);
    close(fd);
    return status;
}

gc_status gc_safetensors_open(const char *path, gc_safetensors **file) { return open_file(path, true, file); }

gc_status gc_safetensors_open_header(const char *path, gc_safetensors **file) { return open_file(path, false, file); }

int gc_safetensors_count(const gc_safetensors *file) { return file->count; }

uint64_t gc_safetensors_data_size(const gc_safetensors *file) { return file->data_size; }

const char *gc_safetensors_name(const gc_safetensors *file, int index) {
    if (index < 0 || index >= file->count)
        gc_fatal("safetensors_name: index %d outside [0, %d) in %s", index, file->count, file->name);
    return file->entries[index].name;
}

const char *gc_safetensors_dtype_of(const gc_safetensors *file, int index, int *ndim, int64_t shape[GC_MAX_DIMS]) {
    if (index < 0 || index >= file->count)
        gc_fatal("safetensors_dtype_of: index %d outside [0, %d) in %s", index, file->count, file->name);
    const gc_safetensors_entry *entry = &file->entries[index];
    *ndim = entry->ndim;
    memcpy(shape, entry->shape, sizeof entry->shape);
    return entry->dtype_name;
}

static int compare_name_with_entry(const void *name, const void *entry) {
    return strcmp(name, ((const gc_safetensors_entry *)entry)->name);
}

const gc_safetensors_entry *gc_safetensors_find(const gc_safetensors *file, const char *name) {
    return bsearch(name, file->entries, (size_t)file->count, sizeof *file->entries, compare_name_with_entry);
}

gc_tensor *gc_safetensors_get(const gc_safetensors *file, const char *name, gc_device device) {
    if (!file->data) gc_fatal("safetensors_get: %s was opened for its header only", file->name);
    const gc_safetensors_entry *entry = gc_safetensors_find(file, name);
    if (!entry) {
        gc_safetensors_format_error(file->name, "no tensor named '%s'", name);
        return NULL;
    }
    if (entry->foreign) {
        gc_safetensors_format_error(file->name, "tensor '%s' is %s, a dtype gradcache has no tensors of", name,
                                    entry->dtype_name);
        return NULL;
    }
    return gc_from_host(file->data + entry->begin, entry->ndim, entry->shape, entry->dtype, device);
}

int gc_safetensors_metadata_count(const gc_safetensors *file) { return file->metadata_count; }

const char *gc_safetensors_metadata_key(const gc_safetensors *file, int index) {
    if (index < 0 || index >= file->metadata_count)
        gc_fatal("safetensors_metadata_key: index %d outside [0, %d) in %s", index, file->metadata_count, file->name);
    return file->metadata[index]->key;
}

static int compare_key_with_value(const void *key, const void *value) {
    return strcmp(key, (*(const gc_json *const *)value)->key);
}

const char *gc_safetensors_metadata(const gc_safetensors *file, const char *key) {
    if (!file->metadata) return NULL;
    const gc_json *const *value =
        bsearch(key, file->metadata, (size_t)file->metadata_count, sizeof *file->metadata, compare_key_with_value);
    return value ? (*value)->string : NULL;
}

void gc_safetensors_close(gc_safetensors *file) {
    if (!file) return;
    gc_json_free(file->header);
    free(file->name);
    free(file->entries);
    free(file->metadata);
    free(file->data);
    free(file);
}
