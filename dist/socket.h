/* TCP sockets with deadlines: the only place dist/ touches the network API. Every call that
 * can wait takes an absolute deadline (gc_deadline_after) and gives up with GC_ERR_PEER
 * when it passes, so nothing in dist/ can hang. Private to dist/. */
#ifndef GC_DIST_SOCKET_H
#define GC_DIST_SOCKET_H

#include <stdbool.h>
#include <stddef.h>

#include "gradcache/clock.h"
#include "gradcache/error.h"

/* The deadline `seconds` from now, on the library's clock (gc_seconds). */
double gc_deadline_after(double seconds);
/* Milliseconds left until the deadline, for poll() (0 when it has passed). */
int gc_ms_until(double deadline);

/* A listening socket on host:port (host NULL or "0.0.0.0": every interface; port 0: any
 * free port). -1 with GC_ERR_IO (in use, not permitted) or GC_ERR_FORMAT (bad host). */
int gc_socket_listen(const char *host, int port, int backlog);
/* The local port (and, when addr is not NULL, the dotted address) of a socket. */
int gc_socket_port(int fd);
void gc_socket_address(int fd, char *addr, size_t size);
/* "address:port" of the peer of a connected socket ("?" when it has none), for logs. */
void gc_socket_peer(int fd, char *text, size_t size);
/* Connects to host:port, retrying a refused or unreachable connection every 50 ms until the
 * deadline; the socket is non-blocking, with TCP_NODELAY. -1 with GC_ERR_PEER or
 * GC_ERR_FORMAT (host does not resolve). */
int gc_socket_connect(const char *host, int port, double deadline);
/* Accepts one connection (non-blocking, TCP_NODELAY); -1 with GC_ERR_PEER at the deadline. */
int gc_socket_accept(int listen_fd, double deadline);
/* Sends or receives exactly `size` bytes before the deadline. On failure: GC_ERR_PEER and a
 * message "<what>: <reason>" (the peer closed the connection, timed out, ...). */
gc_status gc_socket_send_all(int fd, const void *data, size_t size, double deadline, const char *what);
gc_status gc_socket_recv_all(int fd, void *data, size_t size, double deadline, const char *what);
/* Makes a socket non-blocking and sets TCP_NODELAY. */
void gc_socket_prepare(int fd);
/* Shuts both directions down (the peer sees end of file at once) and closes; -1 is a no-op. */
void gc_socket_close(int fd);

/* One step of a non-blocking transfer: moves what the socket takes or gives now.
 * Returns the bytes moved (0: would block), or -1 with *closed set when the peer closed the
 * connection (recv) or it broke (send), errno kept for the message. */
long gc_socket_send_some(int fd, const void *data, size_t size, bool *closed);
long gc_socket_recv_some(int fd, void *data, size_t size, bool *closed);

#endif
