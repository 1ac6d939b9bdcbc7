/* Bounded line reading, and the error a reader gives for a bad line: a line of outside input
 * is read only up to a limit, so that a stream that is not the text it should be (/dev/zero, a
 * binary file, a pipe that never sends a newline) costs at most a line's bytes of memory, never
 * the whole stream. */
#ifndef GC_TRAIN_LINES_H
#define GC_TRAIN_LINES_H

#include <stddef.h>
#include <stdio.h>

#include "gradcache/error.h"

typedef enum gc_line_result {
    GC_LINE_OK,       /* a line: buf[0..*length), its '\n' dropped */
    GC_LINE_LAST,     /* the last line, which has no '\n': buf[0..*length) */
    GC_LINE_END,      /* the end of the stream: nothing more was read */
    GC_LINE_TOO_LONG, /* the line has more than `most` bytes; the rest of it is not read */
    GC_LINE_ERROR     /* a read error, errno set */
} gc_line_result;

/* Reads the next line of `in` into buf[most] (not NUL-terminated: a line may hold NUL bytes,
 * which the caller judges). */
gc_line_result gc_read_line(FILE *in, char *buf, size_t most, size_t *length);

/* Records GC_ERR_FORMAT as "NAME:NUMBER: problem" (the problem at most 255 bytes) and returns it. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
gc_status gc_line_error(const char *name, long long number, const char *fmt, ...);

#endif
