/* The store's server: a thread of rank 0 serving every client's requests (store_protocol.h)
 * once the client has passed the handshake (auth.h). Private to dist/.
 *
 * What an outsider can make it hold is bounded: connections (world_size +
 * GC_STORE_CONNECTION_MARGIN; past that, the oldest connection still in its handshake is
 * closed to make room, so strangers cannot lock the run out), the bytes of a request (a length past
 * the protocol's bound is refused before anything is read), the time a connection may take
 * to finish the handshake, and the bytes of keys and values stored. A refused connection is
 * logged in one line (its address and why) and the server goes on. */
#ifndef GC_DIST_STORE_SERVER_H
#define GC_DIST_STORE_SERVER_H

#include "gradcache/dist.h"

typedef struct gc_store_server gc_store_server;

typedef struct gc_store_server_options {
    const char *bind;             /* the interface's address (NULL or "0.0.0.0": every one) */
    int port;                     /* 0: a free one */
    int world_size;               /* the run's processes */
    const gc_dist_secret *secret; /* the run's (copied) */
    double handshake_seconds;     /* 0: GC_DIST_HANDSHAKE_SECONDS */
} gc_store_server_options;

/* Listens and starts the thread. NULL with GC_ERR_IO (the port is in use, the address is not
 * this machine's, no memory or thread) and a message naming it. */
gc_store_server *gc_store_server_start(const gc_store_server_options *options);
int gc_store_server_port(const gc_store_server *server);
/* Stops once every authenticated client has disconnected, or at the deadline
 * (gc_deadline_after) at the latest, then frees everything. Clients that never finished the
 * handshake are not waited for. */
void gc_store_server_stop(gc_store_server *server, double deadline);

#endif
