/* Output files written whole or not at all: the text goes to a temporary file in the same
 * directory, which is renamed over the destination only once everything was written. A
 * failure (or a crash) never leaves a truncated file under the destination's name. */
#ifndef GC_CLI_OUTPUT_FILE_H
#define GC_CLI_OUTPUT_FILE_H

#include <stdio.h>

#include "gradcache/error.h"

typedef struct gc_output_file {
    FILE *file;      /* write here between open and commit */
    char *path;      /* the destination */
    char *temp_path; /* "<dir>/.<name>.tmp-XXXXXX" */
} gc_output_file;

/* Creates the temporary file. GC_OK, or GC_ERR_IO with a message naming `path`. */
gc_status gc_output_open(gc_output_file *out, const char *path);
/* Flushes, closes and renames the temporary file to the destination; on failure removes it.
 * GC_OK, or GC_ERR_IO with a message naming the destination. */
gc_status gc_output_commit(gc_output_file *out);
/* Closes and removes the temporary file (a no-op on a closed one). */
void gc_output_abort(gc_output_file *out);

#endif
