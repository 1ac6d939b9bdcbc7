/* Collectives around a ring of TCP connections: each rank sends to the next rank and
 * receives from the previous one. Private to dist/.
 *
 * All-reduce is a reduce-scatter followed by an all-gather. The buffer is cut into
 * world_size chunks. In reduce-scatter step t (t = 0 .. W-2) rank r sends chunk r-t-1 and
 * receives chunk r-t-2, adding what arrives into its own copy; after W-1 steps rank r holds
 * chunk r summed over every rank. In all-gather step t rank r sends chunk r-t and receives
 * chunk r-t-1, copying it into place; after W-1 steps every rank holds every chunk. Each rank
 * sends and receives 2 (W-1)/W of the buffer, whatever W is: that is why the ring is the
 * bandwidth-optimal all-reduce.
 *
 * Every step sends exactly the chunk the previous step received, so the steps pipeline: a
 * chunk is moved in segments, and segment j of step t leaves as soon as segment j of step
 * t-1 has arrived (and been added), while later segments are still in flight. Sending,
 * receiving and adding overlap on one thread through non-blocking sockets and poll(). */
#ifndef GC_DIST_RING_H
#define GC_DIST_RING_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "gradcache/dist.h"

typedef struct gc_ring {
    int rank, world;
    int next_fd, prev_fd;  /* -1 in a world of one */
    double timeout;        /* seconds a collective may go without progress */
    size_t segment_bytes;  /* the unit of pipelining */
    uint8_t *scratch;      /* [segment_bytes]: a received segment before it is added */
    int64_t sent_bytes;    /* data bytes sent to the next rank so far (the bytes on the wire but a
                              shift's 8-byte size header) */
} gc_ring;

/* A buffer cut into world chunks: chunk c is elements [offset[c], offset[c] + count[c]). */
typedef struct gc_ring_buffer {
    uint8_t *data;
    size_t element_size;
    gc_dtype dtype;        /* the arithmetic of a reduction (unused by all-gather) */
    const size_t *offset;  /* [world] */
    const size_t *count;   /* [world] */
} gc_ring_buffer;

enum { GC_RING_REDUCE_SCATTER = 1, GC_RING_ALL_GATHER = 2, GC_RING_ALL_REDUCE = 3 };

/* Runs the given phases on the buffer. With GC_RING_REDUCE_SCATTER, rank r's chunk r ends
 * up reduced with op (AVG: divided by the world size); with GC_RING_ALL_GATHER, every chunk
 * c ends up equal to rank c's. `what` names the collective in error messages. GC_ERR_PEER
 * when a neighbour hangs up or stalls past the timeout. */
gc_status gc_ring_run(gc_ring *ring, const gc_ring_buffer *buffer, int phases, gc_dist_op op, const char *what);

/* Forms the ring of the group's ranks (ring_connect.c): ring->next_fd and prev_fd, connected
 * and authenticated, or an error (GC_ERR_PEER naming the rank that did not arrive or failed
 * the handshake) with what was opened left in the fds for the caller to close. */
gc_status gc_ring_connect(gc_process_group *group, gc_ring *ring);

/* The connections a ring listener holds before their hellos (its backlog too): one is the
 * previous rank's, the rest strangers (the store's margin of places beyond the run's). */
#define GC_RING_WAITING_MAX GC_STORE_CONNECTION_MARGIN

/* A connection to a ring listener that has not said its whole hello yet. */
typedef struct gc_ring_waiting {
    int fd;
    short revents;   /* what the last poll saw on fd */
    double limit;    /* its hello is due by then; once challenged, its proof by the run's deadline */
    bool challenged; /* it said hello as the previous rank and was sent its challenge */
    size_t received; /* of its hello, then of its proof */
    uint8_t hello[GC_AUTH_HELLO_SIZE];
    uint8_t proof[GC_AUTH_PROOF_SIZE];
    gc_auth auth; /* its handshake's transcript, once challenged */
    char peer[64];
} gc_ring_waiting;

/* The listener's side of gc_ring_connect (ring_listener.c): the connections waiting, kept
 * from one call to the next (a stranger taken for the previous rank must not cost the
 * connections behind it their place, nor hold the listener while it keeps its proof back). */
typedef struct gc_ring_listener {
    gc_process_group *group;
    int listen_fd;
    char where[64];
    gc_ring_waiting queue[GC_RING_WAITING_MAX]; /* [count], in the order of arrival */
    int count;
} gc_ring_listener;

void gc_ring_listener_init(gc_ring_listener *l, gc_process_group *group, int listen_fd);
/* Closes the connections still waiting (not listen_fd). */
void gc_ring_listener_close(gc_ring_listener *l);

/* Serves the connections, side by side and at most GC_RING_WAITING_MAX at once, until one of
 * them has said hello as the previous rank and been sent its challenge. GC_OK, or GC_ERR_PEER
 * at the deadline. The previous rank sends its proof only once it has answered its own
 * previous rank's challenge, so a rank must challenge before it answers: see ring_connect.c. */
gc_status gc_ring_challenge_prev(gc_ring_listener *l, double deadline);
/* Serves them until one has proved to be the previous rank: its fd, off the queue and sent its
 * verdict, or -1 with GC_ERR_PEER at the deadline. Connections that were challenged wait for
 * their proofs side by side, so one that keeps its proof back holds nothing up. */
int gc_ring_accept_prev(gc_ring_listener *l, double deadline);

/* data[0, size) of rank `root` is copied to every rank, forwarded along the ring. */
gc_status gc_ring_broadcast(gc_ring *ring, void *data, size_t size, int root, const char *what);

/* One step of a ring: send[0, send_size) goes to the next rank while the previous rank's
 * bytes arrive in receive[0, receive_size), both at once through poll(). Each side is preceded
 * by 8 bytes giving its size, so that a receiver expecting another size returns GC_ERR_FORMAT
 * naming both (the ranks disagree on the sizes, or a peer lies) instead of taking the next
 * collective's bytes for its own. In a world of one, send is moved into receive. */
gc_status gc_ring_shift(gc_ring *ring, const void *send, size_t send_size, void *receive, size_t receive_size,
                        const char *what);

#endif
