/* The ring's listener (ring_connect.c): the previous rank's connection found among strangers.
 *
 * A listener that served one connection at a time, waiting up to GC_DIST_HANDSHAKE_SECONDS
 * for each one's hello, let every silent stranger delay the ring by that much. So connections
 * wait side by side, as the store's server's do: each one's hello is read as its bytes come,
 * each has GC_DIST_HANDSHAKE_SECONDS from its acceptance to complete it, a connection whose
 * first bytes are not a hello goes at once, and at most GC_RING_WAITING_MAX wait at a time (a
 * newcomer displaces the one that has waited longest), so strangers can neither hold the
 * listener nor lock the previous rank out. The queue keeps the order of arrival and is served
 * in it: of two hellos that are both whole, the earlier one is judged first (a stranger that
 * came first is challenged and refused, and says so in the log, before the rank behind it).
 * A hello is no secret: a stranger may claim the previous rank, take its challenge and keep
 * its proof back. So every connection that claimed it waits for its proof in the queue, beside
 * the others, each with its own transcript, and the first right proof wins. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "group_internal.h"
#include "ring.h"
#include "socket.h"

typedef gc_ring_listener listener;
typedef gc_ring_waiting waiting;

/* Takes entry i off the queue with its connection open; the later ones move up, in order. */
static int take(listener *l, int i) {
    int fd = l->queue[i].fd;
    memmove(&l->queue[i], &l->queue[i + 1], (size_t)(l->count - i - 1) * sizeof l->queue[0]);
    l->count--;
    return fd;
}

/* Closes queue entry i, logging why. */
static void drop(listener *l, int i, const char *reason) {
    gc_auth_log_refusal(l->where, l->queue[i].peer, reason);
    gc_socket_close(take(l, i));
}

/* Entry i's whole hello: when it claims the previous rank, the challenge goes out and its proof
 * is awaited until the run's deadline (the previous rank proves only once it has answered its
 * own previous rank: ring_connect.c); otherwise it is dropped. */
static void challenge(listener *l, int i, double deadline) {
    waiting *w = &l->queue[i];
    gc_process_group *group = l->group;
    int prev = (group->rank + group->world - 1) % group->world;
    gc_auth_identity me = {GC_AUTH_RING, (uint32_t)group->rank}, expected = {GC_AUTH_RING, (uint32_t)prev};
    if (gc_auth_send_challenge(w->fd, &w->auth, &group->secret, w->hello, me, expected, w->limit, w->peer) != GC_OK) {
        drop(l, i, gc_last_error());
        return;
    }
    w->challenged = true;
    w->received = 0;
    w->limit = deadline;
}

/* Reads what entry i has sent of its hello or its proof: its fd once its proof is right, -1
 * otherwise (still waiting, challenged, or dropped). */
static int hear(listener *l, int i, double deadline) {
    waiting *w = &l->queue[i];
    uint8_t *message = w->challenged ? w->proof : w->hello;
    size_t size = w->challenged ? sizeof w->proof : sizeof w->hello;
    ssize_t got = recv(w->fd, message + w->received, size - w->received, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return -1;
    if (got <= 0) {
        const char *when = w->challenged ? "before its proof" : "before its hello";
        char reason[64];
        snprintf(reason, sizeof reason, "%s %s", got == 0 ? "it hung up" : "the connection failed", when);
        drop(l, i, reason);
        return -1;
    }
    w->received += (size_t)got;
    if (!w->challenged && !gc_auth_hello_plausible(w->hello, w->received)) {
        drop(l, i, "it does not speak gradcache's handshake");
        return -1;
    }
    if (w->received < size) return -1;
    if (!w->challenged) {
        challenge(l, i, deadline);
        return -1;
    }
    if (gc_auth_accept_proof(w->fd, &w->auth, w->proof, deadline, w->peer) == GC_OK) return take(l, i);
    drop(l, i, gc_last_error());
    return -1;
}

/* Accepts what is waiting on the listening socket, displacing the longest-waiting entry when
 * the queue is full. */
static void admit(listener *l, double deadline) {
    for (int accepted = 0; accepted < GC_RING_WAITING_MAX; accepted++) {
        int fd = gc_socket_accept(l->listen_fd, 0);
        if (fd < 0) return;
        if (l->count == GC_RING_WAITING_MAX) drop(l, 0, "displaced by newer connections before finishing its hello");
        waiting *w = &l->queue[l->count++];
        *w = (waiting){.fd = fd, .limit = gc_deadline_after(GC_DIST_HANDSHAKE_SECONDS)};
        if (w->limit > deadline) w->limit = deadline;
        gc_socket_peer(fd, w->peer, sizeof w->peer);
    }
}

void gc_ring_listener_init(listener *l, gc_process_group *group, int listen_fd) {
    *l = (listener){.group = group, .listen_fd = listen_fd};
    snprintf(l->where, sizeof l->where, "rank %d, ring", group->rank);
}

void gc_ring_listener_close(listener *l) {
    while (l->count > 0) gc_socket_close(take(l, 0));
}

static bool any_challenged(const listener *l) {
    for (int i = 0; i < l->count; i++)
        if (l->queue[i].challenged) return true;
    return false;
}

/* Serves the queue until the previous rank is challenged (proven false) or has proved itself
 * (proven true: its fd). */
static int serve(listener *l, bool proven, double deadline) {
    int found = -1;
    while (found < 0 && (proven || !any_challenged(l)) && gc_ms_until(deadline) > 0) {
        struct pollfd polls[1 + GC_RING_WAITING_MAX] = {{.fd = l->listen_fd, .events = POLLIN}};
        double wake = deadline;
        for (int i = 0; i < l->count; i++) {
            polls[1 + i] = (struct pollfd){.fd = l->queue[i].fd, .events = POLLIN};
            if (l->queue[i].limit < wake) wake = l->queue[i].limit;
        }
        if (poll(polls, (nfds_t)(1 + l->count), gc_ms_until(wake)) < 0 && errno != EINTR) break;
        for (int i = 0; i < l->count; i++) l->queue[i].revents = polls[1 + i].revents;
        /* in the order of arrival; an entry that leaves the queue moves the later ones up */
        for (int i = 0; i < l->count && found < 0;) {
            int before = l->count;
            if (l->queue[i].revents) found = hear(l, i, deadline);
            else if (gc_ms_until(l->queue[i].limit) == 0)
                drop(l, i, l->queue[i].challenged ? "it sent no proof in time" : "it sent no whole hello in time");
            if (l->count == before) i++;
        }
        if (found < 0 && polls[0].revents) admit(l, deadline);
    }
    if (found < 0 && (proven || !any_challenged(l))) {
        gc_process_group *group = l->group;
        int prev = (group->rank + group->world - 1) % group->world;
        gc_set_error(GC_ERR_PEER, "rank %d did not connect within %g s (did it start?)", prev, group->timeout);
    }
    return found;
}

gc_status gc_ring_challenge_prev(listener *l, double deadline) {
    serve(l, false, deadline);
    return any_challenged(l) ? GC_OK : GC_ERR_PEER;
}

int gc_ring_accept_prev(listener *l, double deadline) { return serve(l, true, deadline); }
