/* The error model of include/gradcache/error.h: a thread-local record for the errors a
 * caller can handle, and one line plus abort() for programmer errors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/error.h"

static _Thread_local gc_status last_status = GC_OK;
static _Thread_local char last_message[512];

gc_status gc_last_status(void) { return last_status; }

const char *gc_last_error(void) { return last_status == GC_OK ? "no error" : last_message; }

void gc_clear_error(void) {
    last_status = GC_OK;
    last_message[0] = '\0';
}

const char *gc_status_name(gc_status status) {
    switch (status) {
    case GC_OK: return "ok";
    case GC_ERR_OUT_OF_MEMORY: return "out of memory";
    case GC_ERR_MEM_LIMIT: return "memory limit reached";
    case GC_ERR_IO: return "I/O error";
    case GC_ERR_FORMAT: return "malformed input";
    case GC_ERR_PEER: return "peer failed";
    case GC_ERR_UNAVAILABLE: return "unavailable";
    case GC_ERR_NON_FINITE: return "not finite";
    case GC_ERR_CONFIG: return "bad configuration";
    }
    return "unknown status";
}

void gc_set_error(gc_status status, const char *fmt, ...) {
    /* formatted apart first, so that a message may quote the previous one (gc_last_error()) */
    char message[sizeof last_message];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    /* An error is one line: a name or value quoted from outside input (a tensor name, a
     * metadata value, an environment variable) may hold a newline or another control byte. */
    for (char *c = message; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    memcpy(last_message, message, sizeof message);
    last_status = status;
}

void gc_fatal(const char *fmt, ...) {
    char line[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    fprintf(stderr, "gradcache: %s\n", line);
    fflush(stderr);
    abort();
}
