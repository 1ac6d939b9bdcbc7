/* The launcher's output relay (see launch_relay.h). */
#include "launch_relay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcache/error.h"

gc_status gc_relay_init(gc_relay *relay, int fd, FILE *out, int rank) {
    *relay = (gc_relay){.fd = -1, .out = out, .rank = rank, .pending = malloc(GC_RELAY_LINE_MAX)};
    if (relay->pending) {
        relay->fd = fd;
        return GC_OK;
    }
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "launch: out of host memory for an output buffer");
    return GC_ERR_OUT_OF_MEMORY;
}

/* One line "[rank] text\n", flushed at once so that it lands whole (the launcher has one
 * thread: nothing else writes in between). The text goes byte for byte, NUL bytes included.
 * A failed write (the reader gone: EPIPE, SIGPIPE being ignored while the launcher runs)
 * loses this output only; the processes run on. */
static void emit(gc_relay *relay, const char *text, size_t length) {
    fprintf(relay->out, "[%d] ", relay->rank);
    fwrite(text, 1, length, relay->out);
    fputc('\n', relay->out);
    fflush(relay->out);
    clearerr(relay->out);
}

void gc_relay_close(gc_relay *relay) {
    if (relay->fd >= 0) {
        if (relay->length) emit(relay, relay->pending, relay->length);
        close(relay->fd);
    }
    relay->length = 0;
    relay->fd = -1;
    free(relay->pending);
    relay->pending = NULL;
}

void gc_relay_read(gc_relay *relay) {
    char chunk[16384];
    ssize_t got = read(relay->fd, chunk, sizeof chunk);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0) {
        gc_relay_close(relay);
        return;
    }
    for (ssize_t i = 0; i < got; i++) {
        if (chunk[i] == '\n') {
            emit(relay, relay->pending, relay->length);
            relay->length = 0;
            continue;
        }
        /* a line longer than the buffer is cut, not held without bound; the cut waits for a
         * byte that is not the newline, so that a line of exactly the buffer's length passes whole */
        if (relay->length == GC_RELAY_LINE_MAX) {
            emit(relay, relay->pending, relay->length);
            relay->length = 0;
        }
        relay->pending[relay->length++] = chunk[i];
    }
}
