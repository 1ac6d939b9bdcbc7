/* The launcher's output relay: the bytes a process writes to a pipe become whole lines on
 * the launcher's own stdout or stderr, each prefixed with the process's rank, so that lines
 * of several processes never mix. Private to dist/. */
#ifndef GC_DIST_LAUNCH_RELAY_H
#define GC_DIST_LAUNCH_RELAY_H

#include <stddef.h>
#include <stdio.h>

#include "gradcache/error.h"

/* The longest line passed on whole; a longer one is cut into lines of this length. */
#define GC_RELAY_LINE_MAX (64u << 10)

typedef struct gc_relay {
    int fd;          /* the pipe's read end; -1 once closed */
    FILE *out;       /* stdout or stderr */
    int rank;
    char *pending;   /* [GC_RELAY_LINE_MAX]: an unfinished line */
    size_t length;
} gc_relay;

/* Takes `fd` over. GC_ERR_OUT_OF_MEMORY (recorded) when the line buffer cannot be had: then
 * `fd` stays the caller's and the relay is closed (fd -1). */
gc_status gc_relay_init(gc_relay *relay, int fd, FILE *out, int rank);
/* Reads what the pipe holds and writes out every finished line; at end of file, writes the
 * unfinished rest as a line of its own and closes the pipe. */
void gc_relay_read(gc_relay *relay);
/* Flushes the unfinished rest, closes the pipe (if still open) and frees the relay. */
void gc_relay_close(gc_relay *relay);

#endif
