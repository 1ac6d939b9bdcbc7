/* Pair files (see pairs.h). Two passes over the bytes: the first checks every line and
 * counts the fields, so that nothing is allocated for a file that will be refused; the
 * second copies the fields into ONE allocation holding the pointer table followed by the
 * NUL-terminated texts, so that gc_pairs_free is a single free. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pairs.h"

/* One line of the input, without its "\n" or "\r\n". */
typedef struct line {
    const char *text;
    size_t length;
} line;

/* The line starting at *position (< size); moves *position past its newline. */
static line next_line(const char *data, size_t size, size_t *position) {
    const char *start = data + *position;
    const char *newline = memchr(start, '\n', size - *position);
    line result = {start, newline ? (size_t)(newline - start) : size - *position};
    *position += result.length + (newline ? 1 : 0);
    if (newline && result.length > 0 && start[result.length - 1] == '\r') result.length--;
    return result;
}

static gc_status line_error(const char *name, long long number, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static gc_status line_error(const char *name, long long number, const char *fmt, ...) {
    char problem[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(problem, sizeof problem, fmt, args);
    va_end(args);
    gc_set_error(GC_ERR_FORMAT, "%s:%lld: %s", name, number, problem);
    return GC_ERR_FORMAT;
}

/* The length of the valid UTF-8 sequence at text[0..length), or 0 when it is not one:
 * overlong forms, UTF-16 surrogates (U+D800..U+DFFF), code points above U+10FFFF, stray
 * continuation bytes and sequences cut short are all refused (RFC 3629). */
static size_t utf8_sequence(const unsigned char *text, size_t length) {
    unsigned char lead = text[0];
    size_t needed;
    unsigned char low = 0x80, high = 0xBF; /* the range of the second byte */
    if (lead < 0x80) return 1;
    if (lead < 0xC2) return 0;                       /* continuation byte, or overlong 2-byte form */
    if (lead < 0xE0) needed = 2;
    else if (lead < 0xF0) {
        needed = 3;
        if (lead == 0xE0) low = 0xA0;                /* overlong 3-byte form */
        if (lead == 0xED) high = 0x9F;               /* surrogates */
    } else if (lead < 0xF5) {
        needed = 4;
        if (lead == 0xF0) low = 0x90;                /* overlong 4-byte form */
        if (lead == 0xF4) high = 0x8F;               /* above U+10FFFF */
    } else {
        return 0;                                    /* above U+10FFFF */
    }
    if (length < needed || text[1] < low || text[1] > high) return 0;
    for (size_t i = 2; i < needed; i++)
        if (text[i] < 0x80 || text[i] > 0xBF) return 0;
    return needed;
}

/* Checks one line; sets *fields to its number of fields. */
static gc_status check_line(const char *name, long long number, line text, int *fields) {
    if (text.length == 0) return line_error(name, number, "empty line");
    if (text.length > GC_PAIRS_MAX_LINE)
        return line_error(name, number, "line of %zu bytes is longer than the limit of %d", text.length,
                          GC_PAIRS_MAX_LINE);
    const unsigned char *bytes = (const unsigned char *)text.text;
    *fields = 1;
    for (size_t i = 0; i < text.length;) {
        unsigned char byte = bytes[i];
        if (byte == '\0') return line_error(name, number, "NUL byte at column %zu", i + 1);
        if (byte == '\r')
            return line_error(name, number, "carriage return not followed by a newline at column %zu", i + 1);
        if (byte == '\t') {
            if (i == 0 || i + 1 == text.length || bytes[i + 1] == '\t')
                return line_error(name, number, "empty field (%s)",
                                  i == 0 ? "the line starts with a tab"
                                  : i + 1 == text.length ? "the line ends with a tab" : "two tabs in a row");
            ++*fields;
        }
        size_t step = utf8_sequence(bytes + i, text.length - i);
        if (step == 0) return line_error(name, number, "invalid UTF-8 (byte 0x%02X at column %zu)", byte, i + 1);
        i += step;
    }
    return GC_OK;
}

/* The first pass: every line checked; the number of examples and of fields per line. */
static gc_status check_all(const char *data, size_t size, const char *name, int64_t *count, int *columns) {
    long long number = 0;
    for (size_t position = 0; position < size;) {
        line text = next_line(data, size, &position);
        int fields = 0;
        gc_status status = check_line(name, ++number, text, &fields);
        if (status != GC_OK) return status;
        if (fields < 2)
            return line_error(name, number, "one field; expected query<TAB>positive[<TAB>negative...]");
        if (number == 1) *columns = fields;
        if (fields != *columns)
            return line_error(name, number,
                              "%d fields where line 1 has %d (every line needs the same number of negatives)", fields,
                              *columns);
    }
    if (number == 0) {
        gc_set_error(GC_ERR_FORMAT, "%s: no examples (the file is empty)", name);
        return GC_ERR_FORMAT;
    }
    *count = number;
    return GC_OK;
}

gc_status gc_pairs_parse(const char *data, size_t size, const char *name, gc_pairs *pairs) {
    *pairs = (gc_pairs){0};
    int64_t count = 0;
    int columns = 0;
    gc_status status = check_all(data, size, name, &count, &columns);
    if (status != GC_OK) return status;

    /* Each line's text plus one NUL fits in its bytes and its newline, or in the one extra
     * byte given for a last line without a newline. */
    size_t texts = (size_t)count * (size_t)columns;
    if (texts > (SIZE_MAX - size - 1) / sizeof(char *)) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: too large to hold in memory", name);
        return GC_ERR_OUT_OF_MEMORY;
    }
    char **table = malloc(texts * sizeof(char *) + size + 1);
    if (!table) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu bytes of text", name, size);
        return GC_ERR_OUT_OF_MEMORY;
    }
    char *out = (char *)(table + texts);
    size_t field = 0;
    for (size_t position = 0; position < size;) {
        line text = next_line(data, size, &position);
        table[field++] = out;
        for (size_t i = 0; i < text.length; i++) {
            if (text.text[i] == '\t') {
                *out++ = '\0';
                table[field++] = out;
            } else {
                *out++ = text.text[i];
            }
        }
        *out++ = '\0';
    }
    pairs->count = count;
    pairs->negatives = columns - 2;
    pairs->texts = table;
    return GC_OK;
}

static gc_status io_error(const char *path, const char *what, int error) {
    gc_set_error(GC_ERR_IO, "%s: %s: %s", path, what, strerror(error));
    return GC_ERR_IO;
}

/* The whole file into a malloc'ed buffer. Read in chunks rather than by its stat size so
 * that a pipe works too; a folder fails here with EISDIR. */
static gc_status read_file(const char *path, char **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *in = fopen(path, "rb");
    if (!in) return io_error(path, "cannot open", errno);
    size_t capacity = 0;
    gc_status status = GC_OK;
    for (;;) {
        if (*size == capacity) {
            size_t grown = capacity ? 2 * capacity : 1 << 16;
            char *bigger = grown > capacity ? realloc(*data, grown) : NULL;
            if (!bigger) {
                gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory after %zu bytes", path, *size);
                status = GC_ERR_OUT_OF_MEMORY;
                break;
            }
            *data = bigger;
            capacity = grown;
        }
        *size += fread(*data + *size, 1, capacity - *size, in);
        if (ferror(in)) {
            status = io_error(path, "cannot read", errno);
            break;
        }
        if (feof(in)) break;
    }
    fclose(in);
    if (status != GC_OK) {
        free(*data);
        *data = NULL;
        *size = 0;
    }
    return status;
}

gc_status gc_pairs_read(const char *path, gc_pairs *pairs) {
    *pairs = (gc_pairs){0};
    char *data = NULL;
    size_t size = 0;
    gc_status status = read_file(path, &data, &size);
    if (status == GC_OK) status = gc_pairs_parse(data, size, path, pairs);
    free(data);
    return status;
}

void gc_pairs_free(gc_pairs *pairs) {
    free(pairs->texts);
    *pairs = (gc_pairs){0};
}
