/* Collectives around a ring (see ring.h). */
#include "ring.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "host_reduce.h"
#include "socket.h"

static int wrap(int i, int world) { return ((i % world) + world) % world; }

/* What step t of a run does: send one chunk, receive another, add or copy it in. */
typedef struct step {
    int send_chunk, recv_chunk;
    bool add;       /* reduce-scatter: add what arrives; all-gather: copy it */
    bool finish;    /* the last reduce-scatter step: the chunk received is complete (AVG divides) */
} step;

typedef struct run {
    gc_ring *ring;
    const gc_ring_buffer *buffer;
    gc_dist_op op;
    step steps[2];  /* the shape of a reduce-scatter step and of an all-gather step */
    int rs_steps, total_steps;
    size_t segment_elements;
    /* the cursors: (step, segment, bytes done in that segment) */
    int send_t, send_j, recv_t, recv_j;
    size_t send_done, recv_done;
    bool moved;     /* bytes moved since the last poll: the timeout counts from the last progress */
} run;

static step step_at(const run *r, int t) {
    int rank = r->ring->rank, world = r->ring->world;
    if (t < r->rs_steps)
        return (step){wrap(rank - t - 1, world), wrap(rank - t - 2, world), true, t == r->rs_steps - 1};
    t -= r->rs_steps;
    return (step){wrap(rank - t, world), wrap(rank - t - 1, world), false, false};
}

static int segments_of(const run *r, int chunk) {
    size_t count = r->buffer->count[chunk];
    return (int)((count + r->segment_elements - 1) / r->segment_elements);
}

/* Elements [first, first + *n) of segment j of chunk c, as a byte pointer. */
static uint8_t *segment(const run *r, int chunk, int j, size_t *bytes) {
    size_t first = (size_t)j * r->segment_elements;
    size_t n = r->buffer->count[chunk] - first;
    if (n > r->segment_elements) n = r->segment_elements;
    *bytes = n * r->buffer->element_size;
    return r->buffer->data + (r->buffer->offset[chunk] + first) * r->buffer->element_size;
}

/* Moves a cursor past finished segments and empty chunks. */
static void advance(const run *r, int *t, int *j, bool sending) {
    while (*t < r->total_steps) {
        step s = step_at(r, *t);
        int n = segments_of(r, sending ? s.send_chunk : s.recv_chunk);
        if (*j < n) return;
        (*t)++;
        *j = 0;
    }
}

/* Segment (t, j) may leave once segment (t-1, j) has arrived: it is the same data. */
static bool can_send(const run *r) {
    if (r->send_t >= r->total_steps) return false;
    if (r->send_t == 0) return true;
    return r->recv_t > r->send_t - 1 || (r->recv_t == r->send_t - 1 && r->recv_j > r->send_j);
}

static gc_status broken(const gc_ring *ring, const char *what, bool receiving) {
    int peer = receiving ? wrap(ring->rank - 1, ring->world) : wrap(ring->rank + 1, ring->world);
    if (receiving && errno == 0)
        gc_set_error(GC_ERR_PEER, "%s: rank %d closed its connection to rank %d (it died or failed)", what, peer,
                     ring->rank);
    else
        gc_set_error(GC_ERR_PEER, "%s: the connection between rank %d and rank %d broke: %s", what, ring->rank, peer,
                     strerror(errno));
    return GC_ERR_PEER;
}

static gc_status stalled(const gc_ring *ring, const char *what, bool receiving) {
    int peer = receiving ? wrap(ring->rank - 1, ring->world) : wrap(ring->rank + 1, ring->world);
    gc_set_error(GC_ERR_PEER, "%s: rank %d %s for %g s (timeout; is it stuck or dead?)", what, peer,
                 receiving ? "sent nothing" : "took nothing", ring->timeout);
    return GC_ERR_PEER;
}

static gc_status send_step(run *r, const char *what) {
    size_t bytes;
    uint8_t *data = segment(r, step_at(r, r->send_t).send_chunk, r->send_j, &bytes);
    bool closed;
    long sent = gc_socket_send_some(r->ring->next_fd, data + r->send_done, bytes - r->send_done, &closed);
    if (closed) return broken(r->ring, what, false);
    r->moved |= sent > 0;
    r->ring->sent_bytes += sent;
    r->send_done += (size_t)sent;
    if (r->send_done == bytes) {
        r->send_done = 0;
        r->send_j++;
        advance(r, &r->send_t, &r->send_j, true);
    }
    return GC_OK;
}

static gc_status recv_step(run *r, const char *what) {
    step s = step_at(r, r->recv_t);
    size_t bytes;
    uint8_t *place = segment(r, s.recv_chunk, r->recv_j, &bytes);
    uint8_t *into = s.add ? r->ring->scratch : place;
    bool closed;
    long got = gc_socket_recv_some(r->ring->prev_fd, into + r->recv_done, bytes - r->recv_done, &closed);
    if (closed) return broken(r->ring, what, true);
    r->moved |= got > 0;
    r->recv_done += (size_t)got;
    if (r->recv_done < bytes) return GC_OK;
    size_t n = bytes / r->buffer->element_size;
    if (s.add) gc_host_reduce(r->buffer->dtype, r->op, place, into, n);
    if (s.finish && r->op == GC_DIST_AVG) gc_host_divide(r->buffer->dtype, place, n, r->ring->world);
    r->recv_done = 0;
    r->recv_j++;
    advance(r, &r->recv_t, &r->recv_j, false);
    return GC_OK;
}

gc_status gc_ring_run(gc_ring *ring, const gc_ring_buffer *buffer, int phases, gc_dist_op op, const char *what) {
    int world = ring->world;
    if (world == 1) return GC_OK; /* chunk 0 is already the sum, the average and the gathering */
    run r = {.ring = ring, .buffer = buffer, .op = op};
    r.rs_steps = phases & GC_RING_REDUCE_SCATTER ? world - 1 : 0;
    r.total_steps = r.rs_steps + (phases & GC_RING_ALL_GATHER ? world - 1 : 0);
    r.segment_elements = ring->segment_bytes / buffer->element_size;
    if (r.segment_elements == 0) r.segment_elements = 1;
    advance(&r, &r.send_t, &r.send_j, true);
    advance(&r, &r.recv_t, &r.recv_j, false);
    double deadline = gc_deadline_after(ring->timeout);
    while (r.send_t < r.total_steps || r.recv_t < r.total_steps) {
        bool sending = can_send(&r), receiving = r.recv_t < r.total_steps;
        struct pollfd polls[2] = {{.fd = sending ? ring->next_fd : -1, .events = POLLOUT},
                                  {.fd = receiving ? ring->prev_fd : -1, .events = POLLIN}};
        int ready = poll(polls, 2, gc_ms_until(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return stalled(ring, what, receiving);
        if (polls[1].revents) {
            gc_status status = recv_step(&r, what);
            if (status != GC_OK) return status;
        }
        if (polls[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
            gc_status status = send_step(&r, what);
            if (status != GC_OK) return status;
        }
        if (r.moved) deadline = gc_deadline_after(ring->timeout);
        r.moved = false;
    }
    return GC_OK;
}

gc_status gc_ring_broadcast(gc_ring *ring, void *data, size_t size, int root, const char *what) {
    if (ring->world == 1 || size == 0) return GC_OK;
    bool has_prev = ring->rank != root, has_next = wrap(ring->rank + 1, ring->world) != root;
    uint8_t *bytes = data;
    size_t received = has_prev ? 0 : size, sent = has_next ? 0 : size;
    double deadline = gc_deadline_after(ring->timeout);
    while (received < size || sent < size) {
        bool sending = sent < received, receiving = received < size;
        struct pollfd polls[2] = {{.fd = sending ? ring->next_fd : -1, .events = POLLOUT},
                                  {.fd = receiving ? ring->prev_fd : -1, .events = POLLIN}};
        int ready = poll(polls, 2, gc_ms_until(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return stalled(ring, what, receiving);
        bool closed;
        if (polls[1].revents) {
            long got = gc_socket_recv_some(ring->prev_fd, bytes + received, size - received, &closed);
            if (closed) return broken(ring, what, true);
            received += (size_t)got;
            if (got > 0) deadline = gc_deadline_after(ring->timeout);
        }
        if (polls[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
            size_t chunk = received - sent < ring->segment_bytes ? received - sent : ring->segment_bytes;
            long moved = gc_socket_send_some(ring->next_fd, bytes + sent, chunk, &closed);
            if (closed) return broken(ring, what, false);
            sent += (size_t)moved;
            ring->sent_bytes += moved;
            if (moved > 0) deadline = gc_deadline_after(ring->timeout);
        }
    }
    return GC_OK;
}

/* One direction of a shift: the 8-byte size header (little-endian), then the payload. */
typedef struct shift_stream {
    uint8_t header[8];
    uint8_t *payload;
    size_t size, done; /* done counts the header's bytes too */
} shift_stream;

static bool stream_done(const shift_stream *s) { return s->done == sizeof s->header + s->size; }

/* Where the next bytes of the stream go or come from, and how many are left there. */
static uint8_t *stream_at(shift_stream *s, size_t *left) {
    if (s->done < sizeof s->header) {
        *left = sizeof s->header - s->done;
        return s->header + s->done;
    }
    *left = s->size - (s->done - sizeof s->header);
    return s->payload + (s->done - sizeof s->header);
}

static uint64_t header_size(const shift_stream *s) {
    uint64_t size = 0;
    for (int i = 7; i >= 0; i--) size = size << 8 | s->header[i];
    return size;
}

gc_status gc_ring_shift(gc_ring *ring, const void *send, size_t send_size, void *receive, size_t receive_size,
                        const char *what) {
    if (ring->world == 1) {
        if (send_size) memmove(receive, send, send_size); /* the front-end checked the sizes */
        return GC_OK;
    }
    shift_stream out = {.payload = (uint8_t *)send, .size = send_size}, in = {.payload = receive, .size = receive_size};
    for (int i = 0; i < 8; i++) out.header[i] = (uint8_t)((uint64_t)send_size >> (8 * i));
    double deadline = gc_deadline_after(ring->timeout);
    while (!stream_done(&out) || !stream_done(&in)) {
        bool sending = !stream_done(&out), receiving = !stream_done(&in);
        struct pollfd polls[2] = {{.fd = sending ? ring->next_fd : -1, .events = POLLOUT},
                                  {.fd = receiving ? ring->prev_fd : -1, .events = POLLIN}};
        int ready = poll(polls, 2, gc_ms_until(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return stalled(ring, what, receiving);
        bool closed, moved = false;
        size_t left;
        if (polls[1].revents) {
            bool in_header = in.done < sizeof in.header;
            uint8_t *at = stream_at(&in, &left);
            long got = gc_socket_recv_some(ring->prev_fd, at, left, &closed);
            if (closed) return broken(ring, what, true);
            in.done += (size_t)got;
            moved |= got > 0;
            if (in_header && in.done == sizeof in.header && header_size(&in) != receive_size) {
                /* the size is the peer's word: an error to return, whoever is wrong; the streams are
                 * out of step now, so the ring's connections are shut and every later collective,
                 * here and at the neighbours, fails rather than take the wrong bytes */
                gc_set_error(GC_ERR_FORMAT, "%s: rank %d sent %llu bytes, rank %d expects %zu (the ranks disagree on "
                             "the sizes)", what, wrap(ring->rank - 1, ring->world),
                             (unsigned long long)header_size(&in), ring->rank, receive_size);
                shutdown(ring->prev_fd, SHUT_RDWR);
                shutdown(ring->next_fd, SHUT_RDWR);
                return GC_ERR_FORMAT;
            }
        }
        if (polls[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
            uint8_t *at = stream_at(&out, &left);
            long sent = gc_socket_send_some(ring->next_fd, at, left, &closed);
            if (closed) return broken(ring, what, false);
            out.done += (size_t)sent;
            moved |= sent > 0;
        }
        if (moved) deadline = gc_deadline_after(ring->timeout);
    }
    ring->sent_bytes += (int64_t)send_size; /* the payload, as NCCL's count has it (not the size header) */
    return GC_OK;
}
