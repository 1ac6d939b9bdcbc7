/* A corpus to embed: texts one per line in, embeddings out (gradcache/train.h; the library
 * behind `gradcache encode`). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/checkpoint.h"
#include "gradcache/files.h"
#include "gradcache/train.h"
#include "lines.h"

static gc_status io_error(const char *name, const char *what, int error) {
    gc_set_error(GC_ERR_IO, "%s: %s: %s", name, what, strerror(error));
    return GC_ERR_IO;
}

/* Appends a copy of text[0..length) (NUL-terminated) to lines; false when memory runs out. */
static bool add_text(gc_text_lines *lines, const char *text, size_t length, int64_t *capacity) {
    if (lines->count == *capacity) {
        int64_t grown = *capacity ? 2 * *capacity : 256;
        char **texts = realloc(lines->texts, (size_t)grown * sizeof *texts);
        if (!texts) return false;
        lines->texts = texts;
        *capacity = grown;
    }
    char *copy = malloc(length + 1);
    if (!copy) return false;
    memcpy(copy, text, length);
    copy[length] = '\0';
    lines->texts[lines->count++] = copy;
    return true;
}

gc_status gc_text_lines_read_stream(FILE *in, const char *name, gc_text_lines *lines) {
    *lines = (gc_text_lines){0};
    char *pending = malloc(GC_TEXT_LINE_MAX + 1); /* a line and the '\r' of a "\r\n" */
    int64_t capacity = 0;
    gc_status status = pending ? GC_OK : GC_ERR_OUT_OF_MEMORY;
    for (bool more = true; more && status == GC_OK;) {
        size_t length = 0;
        switch (gc_read_line(in, pending, GC_TEXT_LINE_MAX + 1, &length)) {
        case GC_LINE_END: more = false; continue;
        case GC_LINE_TOO_LONG: length = SIZE_MAX; break;
        case GC_LINE_ERROR: status = io_error(name, "cannot read", errno); continue;
        case GC_LINE_LAST: more = false; break;
        case GC_LINE_OK: break;
        }
        if (length != SIZE_MAX && length > 0 && pending[length - 1] == '\r') length--; /* a "\r\n" line end */
        if (length > GC_TEXT_LINE_MAX) { /* the rest of it is not read */
            gc_set_error(GC_ERR_FORMAT, "%s: line %lld is longer than %d bytes", name, (long long)lines->count + 1,
                         GC_TEXT_LINE_MAX);
            status = GC_ERR_FORMAT;
        } else if (memchr(pending, '\0', length)) {
            gc_set_error(GC_ERR_FORMAT, "%s: line %lld holds a NUL byte: not text", name, (long long)lines->count + 1);
            status = GC_ERR_FORMAT;
        } else if (!add_text(lines, pending, length, &capacity)) {
            status = GC_ERR_OUT_OF_MEMORY;
        }
    }
    free(pending);
    if (status == GC_ERR_OUT_OF_MEMORY)
        gc_set_error(status, "%s: out of host memory after %lld lines", name, (long long)lines->count);
    if (status != GC_OK) gc_text_lines_free(lines);
    return status;
}

gc_status gc_text_lines_read(const char *path, gc_text_lines *lines) {
    if (strcmp(path, "-") == 0) return gc_text_lines_read_stream(stdin, "standard input", lines);
    *lines = (gc_text_lines){0};
    FILE *in = fopen(path, "rb");
    if (!in) return io_error(path, "cannot open", errno);
    gc_status status = gc_text_lines_read_stream(in, path, lines);
    fclose(in);
    return status;
}

void gc_text_lines_free(gc_text_lines *lines) {
    for (int64_t i = 0; i < lines->count; i++) free(lines->texts[i]);
    free(lines->texts);
    *lines = (gc_text_lines){0};
}

/* One row of values per line, tab-separated, each as the shortest "%.9g" that reads back as
 * the same float. */
static gc_status write_tsv(FILE *out, const char *name, const gc_tensor *embeddings) {
    int64_t rows = embeddings->shape[0], width = embeddings->shape[1];
    double *values = malloc((size_t)(rows * width > 0 ? rows * width : 1) * sizeof *values);
    if (!values) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld values", name, (long long)(rows * width));
        return GC_ERR_OUT_OF_MEMORY;
    }
    gc_to_host_f64(embeddings, values);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < width; c++) fprintf(out, c + 1 < width ? "%.9g\t" : "%.9g\n", values[r * width + c]);
    free(values);
    return ferror(out) ? io_error(name, "cannot write", errno ? errno : EIO) : GC_OK;
}

gc_status gc_embeddings_save(const char *path, const gc_tensor *embeddings, gc_embeddings_format format) {
    char text[128];
    if (embeddings->ndim != 2 || !gc_dtype_is_float(embeddings->dtype))
        gc_fatal("embeddings_save: want floating embeddings [N, D], got %s",
                 gc_tensor_str(embeddings, text, sizeof text));
    if (format == GC_EMBEDDINGS_SAFETENSORS) {
        gc_param_list list = {0};
        gc_param_list_add(&list, "", "embeddings", (gc_tensor *)embeddings, false);
        gc_status status = gc_safetensors_save(path, &list, NULL);
        gc_param_list_free(&list);
        return status;
    }
    if (strcmp(path, "-") == 0) {
        gc_status status = write_tsv(stdout, "standard output", embeddings);
        return status == GC_OK && fflush(stdout) != 0 ? io_error("standard output", "cannot write", errno) : status;
    }
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status != GC_OK) return status;
    status = write_tsv(writer.file, path, embeddings);
    if (status != GC_OK) {
        gc_file_abort(&writer);
        return status;
    }
    return gc_file_commit(&writer);
}
