/* Small JSON files read whole (see json_file.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json_file.h"

gc_status gc_json_file_verror(const char *name, const char *fmt, va_list args) {
    char problem[400];
    vsnprintf(problem, sizeof problem, fmt, args);
    gc_set_error(GC_ERR_FORMAT, "%s: %s", name, problem);
    return GC_ERR_FORMAT;
}

gc_status gc_json_file_error(const char *name, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    gc_status status = gc_json_file_verror(name, fmt, args);
    va_end(args);
    return status;
}

gc_status gc_json_file_parse(const char *name, const char *text, size_t length, gc_json **document) {
    gc_json_error error = {0};
    *document = gc_json_parse_document(text, length, GC_JSON_FILE_MAX_DEPTH, &error);
    if (*document) return GC_OK;
    return gc_json_file_error(name, "not valid JSON: %s at byte %zu", error.message, error.position);
}

gc_status gc_file_read_bounded(const char *path, size_t max_size, char **text, size_t *size) {
    *text = NULL;
    *size = 0;
    FILE *file = fopen(path, "rb");
    if (!file) {
        gc_set_error(GC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return GC_ERR_IO;
    }
    struct stat info;
    gc_status status = GC_OK;
    if (fstat(fileno(file), &info) != 0) {
        gc_set_error(GC_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        status = GC_ERR_IO;
    } else if ((uint64_t)info.st_size > max_size) {
        status = gc_json_file_error(path, "%lld bytes, larger than the %zu accepted", (long long)info.st_size, max_size);
    } else if (!(*text = malloc((size_t)info.st_size + 1))) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
        status = GC_ERR_OUT_OF_MEMORY;
    } else if (fread(*text, 1, (size_t)info.st_size, file) != (size_t)info.st_size) {
        gc_set_error(GC_ERR_IO, "%s: cannot read: %s", path, ferror(file) ? strerror(errno) : "it ended early");
        status = GC_ERR_IO;
    } else {
        (*text)[info.st_size] = '\0';
        *size = (size_t)info.st_size;
    }
    fclose(file);
    if (status != GC_OK) {
        free(*text);
        *text = NULL;
    }
    return status;
}

gc_status gc_json_file_read(const char *path, size_t max_size, gc_json **document) {
    *document = NULL;
    char *text;
    size_t size;
    gc_status status = gc_file_read_bounded(path, max_size, &text, &size);
    if (status == GC_OK) status = gc_json_file_parse(path, text, size, document);
    free(text);
    return status;
}
