/* The launcher's output relay (see launch_relay.h). */
#include "launch_relay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcache/error.h"

void gc_relay_init(gc_relay *relay, int fd, FILE *out, int rank) {
    *relay = (gc_relay){.fd = fd, .out = out, .rank = rank, .pending = malloc(GC_RELAY_LINE_MAX)};
    if (!relay->pending) gc_fatal("launch: out of host memory");
}

/* One line "[rank] text\n", written at once so that it lands whole. */
static void emit(gc_relay *relay, const char *text, size_t length) {
    fprintf(relay->out, "[%d] %.*s\n", relay->rank, (int)length, text);
    fflush(relay->out);
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
        relay->pending[relay->length++] = chunk[i];
        if (relay->length == GC_RELAY_LINE_MAX) { /* a line this long is cut, not held without bound */
            emit(relay, relay->pending, relay->length);
            relay->length = 0;
        }
    }
}
