/* Pair files (see gradcache/train.h), read one line at a time: each line is checked as soon as it is
 * complete, and the first bad one stops the reading, so that a malformed stream (a binary
 * file, /dev/zero) costs a line of memory and time, not the whole stream. The fields of the
 * good lines are copied, NUL-terminated, into one growing text block; at the end a table of
 * pointers into it is made (gc_pairs_free frees the block through the first pointer). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "lines.h"

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

static gc_status too_long(const char *name, long long number) {
    return gc_line_error(name, number, "line longer than the limit of %d bytes", GC_PAIRS_MAX_LINE);
}

/* Checks one line; sets *fields to its number of fields. */
static gc_status check_line(const char *name, long long number, line text, int *fields) {
    if (text.length == 0) return gc_line_error(name, number, "empty line");
    if (text.length > GC_PAIRS_MAX_LINE) return too_long(name, number);
    const unsigned char *bytes = (const unsigned char *)text.text;
    *fields = 1;
    for (size_t i = 0; i < text.length;) {
        unsigned char byte = bytes[i];
        if (byte == '\0') return gc_line_error(name, number, "NUL byte at column %zu", i + 1);
        if (byte == '\r')
            return gc_line_error(name, number, "carriage return not followed by a newline at column %zu", i + 1);
        if (byte == '\t') {
            if (i == 0 || i + 1 == text.length || bytes[i + 1] == '\t')
                return gc_line_error(name, number, "empty field (%s)",
                                  i == 0 ? "the line starts with a tab"
                                  : i + 1 == text.length ? "the line ends with a tab" : "two tabs in a row");
            ++*fields;
        }
        size_t step = utf8_sequence(bytes + i, text.length - i);
        if (step == 0) return gc_line_error(name, number, "invalid UTF-8 (byte 0x%02X at column %zu)", byte, i + 1);
        i += step;
    }
    return GC_OK;
}

/* The examples of the lines read so far. */
typedef struct builder {
    const char *name;   /* for messages */
    long long lines;    /* read so far: the number of the next line is lines + 1 */
    int columns;        /* fields per line, set by line 1 */
    char *text;         /* [length]: every field, NUL-terminated, in order */
    size_t length, capacity;
} builder;

/* Room for `more` bytes of text; false when out of memory. */
static bool reserve(builder *b, size_t more) {
    if (more <= b->capacity - b->length) return true;
    size_t capacity = b->capacity ? b->capacity : 1 << 16;
    while (more > capacity - b->length) {
        if (capacity > SIZE_MAX / 2) return false;
        capacity *= 2;
    }
    char *bigger = realloc(b->text, capacity);
    if (!bigger) return false;
    b->text = bigger;
    b->capacity = capacity;
    return true;
}

/* Checks the next line and appends its fields. */
static gc_status add_line(builder *b, line text) {
    long long number = ++b->lines;
    int fields = 0;
    gc_status status = check_line(b->name, number, text, &fields);
    if (status != GC_OK) return status;
    if (fields < 2) return gc_line_error(b->name, number, "one field; expected query<TAB>positive[<TAB>negative...]");
    if (number == 1) b->columns = fields;
    if (fields != b->columns)
        return gc_line_error(b->name, number, "%d fields where line 1 has %d (every line needs the same number of "
                          "negatives)", fields, b->columns);
    if (!reserve(b, text.length + 1)) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory at line %lld", b->name, number);
        return GC_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < text.length; i++) b->text[b->length++] = text.text[i] == '\t' ? '\0' : text.text[i];
    b->text[b->length++] = '\0';
    return GC_OK;
}

/* The pairs the builder holds, which it hands over; or the reason there are none. */
static gc_status finish(builder *b, gc_pairs *pairs) {
    if (b->lines == 0) {
        gc_set_error(GC_ERR_FORMAT, "%s: no examples (the file is empty)", b->name);
        return GC_ERR_FORMAT;
    }
    size_t texts = (size_t)b->lines * (size_t)b->columns;
    char **table = texts <= SIZE_MAX / sizeof *table ? malloc(texts * sizeof *table) : NULL;
    if (!table) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu texts", b->name, texts);
        return GC_ERR_OUT_OF_MEMORY;
    }
    char *field = b->text;
    for (size_t i = 0; i < texts; i++) {
        table[i] = field;
        field += strlen(field) + 1;
    }
    *pairs = (gc_pairs){.count = b->lines, .negatives = b->columns - 2, .texts = table};
    b->text = NULL; /* handed over: table[0] is the block */
    return GC_OK;
}

/* Finishes or drops what the builder holds, by `status`. */
static gc_status end(builder *b, gc_status status, gc_pairs *pairs) {
    if (status == GC_OK) status = finish(b, pairs);
    free(b->text);
    return status;
}

gc_status gc_pairs_parse(const char *data, size_t size, const char *name, gc_pairs *pairs) {
    *pairs = (gc_pairs){0};
    builder b = {.name = name};
    gc_status status = GC_OK;
    for (size_t position = 0; position < size && status == GC_OK;)
        status = add_line(&b, next_line(data, size, &position));
    return end(&b, status, pairs);
}

static gc_status io_error(const char *path, const char *what, int error) {
    gc_set_error(GC_ERR_IO, "%s: %s: %s", path, what, strerror(error));
    return GC_ERR_IO;
}

/* Reads `in` to its end (or its first bad line) into the builder, a line at a time, each
 * checked as soon as its newline arrives (a pipe too). A line is gathered in `pending`; one
 * that outgrows it (GC_PAIRS_MAX_LINE bytes and the '\r' of a "\r\n") is refused before
 * more of it is read. */
static gc_status read_lines(FILE *in, builder *b, char *pending, size_t most) {
    for (;;) {
        size_t length;
        switch (gc_read_line(in, pending, most, &length)) {
        case GC_LINE_END: return GC_OK;
        case GC_LINE_TOO_LONG: return too_long(b->name, b->lines + 1);
        case GC_LINE_ERROR: return io_error(b->name, "cannot read", errno);
        case GC_LINE_LAST: return add_line(b, (line){pending, length});
        case GC_LINE_OK: break;
        }
        bool crlf = length > 0 && pending[length - 1] == '\r'; /* as next_line: only a newline's */
        gc_status status = add_line(b, (line){pending, crlf ? length - 1 : length});
        if (status != GC_OK) return status;
    }
}

gc_status gc_pairs_read_stream(FILE *in, const char *name, gc_pairs *pairs) {
    *pairs = (gc_pairs){0};
    builder b = {.name = name};
    char pending[GC_PAIRS_MAX_LINE + 1];
    return end(&b, read_lines(in, &b, pending, sizeof pending), pairs);
}

gc_status gc_pairs_read(const char *path, gc_pairs *pairs) {
    *pairs = (gc_pairs){0};
    FILE *in = fopen(path, "rb");
    if (!in) return io_error(path, "cannot open", errno);
    gc_status status = gc_pairs_read_stream(in, path, pairs);
    fclose(in);
    return status;
}

void gc_pairs_free(gc_pairs *pairs) {
    if (pairs->texts) free(pairs->texts[0]); /* the text block (see finish) */
    free(pairs->texts);
    *pairs = (gc_pairs){0};
}
