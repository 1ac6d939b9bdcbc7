/* Pair files: one example per line, `query<TAB>positive[<TAB>negative...]`, UTF-8 text.
 * Lines may end in \n or \r\n; the last line may lack its newline. Every problem (missing
 * or unreadable file, an empty line or field, a line longer than GC_PAIRS_MAX_LINE bytes,
 * invalid UTF-8, a NUL byte, a different number of negatives than the first line) is
 * reported with the file and line number and returns GC_ERR_IO or GC_ERR_FORMAT. Files and
 * streams are read a line at a time and the first bad line ends the reading: a stream that
 * is no pair file (/dev/zero, a binary file) is refused after at most one line's bytes. */
#ifndef GC_CLI_PAIRS_H
#define GC_CLI_PAIRS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/error.h"

#define GC_PAIRS_MAX_LINE 4096

typedef struct gc_pairs {
    int64_t count;      /* examples */
    int negatives;      /* hard negatives per example (the same for every line) */
    char **texts;       /* [count * (2 + negatives)]: query, positive, negatives..., NUL-terminated */
} gc_pairs;

gc_status gc_pairs_read(const char *path, gc_pairs *pairs);
/* The same from an open stream (a pipe too), read to its end; `name` is used in messages. */
gc_status gc_pairs_read_stream(FILE *in, const char *name, gc_pairs *pairs);
/* The same from memory (`name` is used in messages); for tests and the fuzzer. */
gc_status gc_pairs_parse(const char *data, size_t size, const char *name, gc_pairs *pairs);
void gc_pairs_free(gc_pairs *pairs);
static inline const char *gc_pairs_text(const gc_pairs *pairs, int64_t example, int column) {
    return pairs->texts[example * (2 + pairs->negatives) + column];
}

#endif
