/* The store's server: a thread of rank 0 serving every client's requests (store_protocol.h).
 * Private to dist/. */
#ifndef GC_DIST_STORE_SERVER_H
#define GC_DIST_STORE_SERVER_H

typedef struct gc_store_server gc_store_server;

/* Listens on every interface at `port` (0: a free one) and starts the thread. NULL with
 * GC_ERR_IO (the port is in use) and a message naming it. */
gc_store_server *gc_store_server_start(int port);
int gc_store_server_port(const gc_store_server *server);
/* Stops once every client has disconnected, or at the deadline (gc_deadline_after) at the
 * latest, then frees everything. */
void gc_store_server_stop(gc_store_server *server, double deadline);

#endif
