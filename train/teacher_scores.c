/* A teacher's scores beside a pair file (gradcache/train.h, docs/DATA.md): one line per example,
 * tab-separated numbers, read a bounded line at a time (train/lines.c) like the pair file, each
 * line checked as it arrives; the first bad one stops the reading naming the file and the line. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "lines.h"

/* The numbers of one line (text[0..length), its newline dropped; text has room for a NUL after
 * it) into row[columns]: exactly `columns` finite numbers, one tab between two. */
static gc_status parse_line(const char *path, long long number, char *text, size_t length, int columns, double *row) {
    if (length == 0) return gc_line_error(path, number, "empty line");
    if (memchr(text, '\0', length)) return gc_line_error(path, number, "NUL byte");
    text[length] = '\0';
    const char *field = text;
    for (int c = 0; c < columns; c++) {
        char *end = (char *)field;
        double value = isspace((unsigned char)*field) ? 0 : strtod(field, &end); /* strtod would skip blanks */
        bool last = c + 1 == columns;
        if (end != field && *end == '\0' && !last)
            return gc_line_error(path, number, "%d scores where %d are expected (the positive's, then one per hard "
                              "negative of the pair file)", c + 1, columns);
        if (end != field && *end == '\t' && last)
            return gc_line_error(path, number, "more than the %d scores expected (the positive's, then one per hard "
                              "negative of the pair file)", columns);
        if (end == field || *end != (last ? '\0' : '\t'))
            return gc_line_error(path, number, "score %d is not a number", c + 1);
        if (!isfinite(value)) return gc_line_error(path, number, "score %d is %g", c + 1, value);
        row[c] = value;
        field = end + 1;
    }
    return GC_OK;
}

/* Every line of `in` into scores->scores: exactly scores->count lines (a line past them is
 * refused as it arrives, so a longer stream is not read to its end). */
static gc_status read_scores(FILE *in, const char *path, gc_teacher_scores *scores, char *pending, size_t most) {
    long long lines = 0;
    for (;;) {
        size_t length;
        gc_line_result result = gc_read_line(in, pending, most, &length);
        if (result == GC_LINE_END) break;
        long long number = ++lines;
        if (result == GC_LINE_ERROR) {
            gc_set_error(GC_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            return GC_ERR_IO;
        }
        if (number > scores->count)
            return gc_line_error(path, number, "more lines than the pair file's %lld examples",
                                 (long long)scores->count);
        if (result == GC_LINE_OK && length > 0 && pending[length - 1] == '\r') length--;
        if (result == GC_LINE_TOO_LONG || length > GC_PAIRS_MAX_LINE)
            return gc_line_error(path, number, "line longer than the limit of %d bytes", GC_PAIRS_MAX_LINE);
        gc_status status = parse_line(path, number, pending, length, scores->columns,
                                      scores->scores + (number - 1) * scores->columns);
        if (status != GC_OK) return status;
    }
    if (lines == scores->count) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: %lld lines for the pair file's %lld examples", path, lines,
                 (long long)scores->count);
    return GC_ERR_FORMAT;
}

gc_status gc_teacher_scores_read(const char *path, int64_t count, int columns, gc_teacher_scores *scores) {
    *scores = (gc_teacher_scores){0};
    if (count < 1 || columns < 1)
        gc_fatal("teacher_scores_read: %lld examples of %d scores", (long long)count, columns);
    double *values = (size_t)count <= SIZE_MAX / sizeof *values / (size_t)columns
                         ? malloc((size_t)count * (size_t)columns * sizeof *values)
                         : NULL;
    if (!values) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld scores", path,
                     (long long)count * columns);
        return GC_ERR_OUT_OF_MEMORY;
    }
    FILE *in = fopen(path, "rb");
    if (!in) {
        gc_set_error(GC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        free(values);
        return GC_ERR_IO;
    }
    gc_teacher_scores read = {.count = count, .columns = columns, .scores = values};
    char pending[GC_PAIRS_MAX_LINE + 2]; /* the line, the '\r' of a "\r\n", the NUL parse_line adds */
    gc_status status = read_scores(in, path, &read, pending, sizeof pending - 1);
    fclose(in);
    if (status != GC_OK) {
        free(values);
        return status;
    }
    *scores = read;
    return GC_OK;
}

void gc_teacher_scores_free(gc_teacher_scores *scores) {
    free(scores->scores);
    *scores = (gc_teacher_scores){0};
}
