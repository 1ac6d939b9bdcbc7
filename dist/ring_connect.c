/* Forming the ring (see ring.h): each rank listens on the address it advertises -- the one
 * its store connection leaves from, so the interface that reaches the master, never every
 * interface -- publishes "address:port" under gc/ring/address/RANK (a key the store lets be
 * written once), connects to the next rank and accepts the previous one.
 *
 * Both connections are authenticated with the run's secret (auth.h), and a rank's server
 * side must not wait for something its client side has not yet sent, or the ranks would
 * wait for each other around the ring. So the steps interleave: send the hello to the next
 * rank; accept the previous rank's hello and send it the challenge; answer the next rank's
 * challenge; check the previous rank's proof; read the next rank's verdict. Each step waits
 * only for a step that a neighbour takes before its own wait. The listener finds the previous
 * rank's connection among strangers (ring_listener.c): one that fails the handshake (a
 * stranger, a wrong secret, another rank) is logged and closed, until the previous rank's
 * arrives or the timeout passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "group_internal.h"
#include "ring.h"
#include "socket.h"

static gc_auth_identity as_rank(int rank) { return (gc_auth_identity){GC_AUTH_RING, (uint32_t)rank}; }

/* Listens on this rank's address and publishes it: the listening socket, or -1 (error
 * recorded). */
static int listen_and_publish(gc_process_group *group) {
    char address[GC_DIST_ADDR_MAX], key[64], value[GC_DIST_ADDR_MAX + 16];
    gc_store_local_address(group->store, address, sizeof address);
    int fd = gc_socket_listen(address, 0, GC_RING_WAITING_MAX);
    if (fd < 0) return -1;
    snprintf(key, sizeof key, "gc/ring/address/%d", group->rank);
    snprintf(value, sizeof value, "%s:%d", address, gc_socket_port(fd));
    if (gc_store_set(group->store, key, value, strlen(value)) != GC_OK) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects to the next rank, whose address it finds in the store, and says hello. */
static int connect_next(gc_process_group *group, gc_auth *auth, double deadline, char *peer, size_t peer_size) {
    int next = (group->rank + 1) % group->world;
    char key[64];
    snprintf(key, sizeof key, "gc/ring/address/%d", next);
    void *value = NULL;
    size_t size;
    int fd = -1;
    if (gc_store_get(group->store, key, &value, &size) == GC_OK) {
        snprintf(peer, peer_size, "rank %d at %s", next, (char *)value);
        char *colon = strrchr(value, ':');
        int port = colon ? atoi(colon + 1) : 0;
        if (colon) *colon = '\0';
        fd = gc_socket_connect(value, port, deadline);
    }
    free(value);
    if (fd >= 0 && gc_auth_send_hello(fd, auth, &group->secret, as_rank(group->rank), deadline, peer) != GC_OK) {
        gc_socket_close(fd);
        fd = -1;
    }
    if (fd < 0) gc_set_error(GC_ERR_PEER, "cannot reach rank %d: %s", next, gc_last_error());
    return fd;
}

gc_status gc_ring_connect(gc_process_group *group, gc_ring *ring) {
    double deadline = gc_deadline_after(group->timeout);
    int next = (group->rank + 1) % group->world;
    gc_auth as_client;
    char next_peer[GC_DIST_ADDR_MAX + 32] = "";
    int listen_fd = listen_and_publish(group);
    gc_status status = listen_fd < 0 ? gc_last_status() : GC_OK;
    gc_ring_listener listener;
    gc_ring_listener_init(&listener, group, listen_fd);
    if (status == GC_OK) ring->next_fd = connect_next(group, &as_client, deadline, next_peer, sizeof next_peer);
    if (status == GC_OK && ring->next_fd < 0) status = gc_last_status();
    /* challenge before answering: the previous rank answers us only once its own next (us)
     * has challenged it, so every rank answering first would wait around the ring forever */
    if (status == GC_OK) status = gc_ring_challenge_prev(&listener, deadline);
    if (status == GC_OK) status = gc_auth_answer(ring->next_fd, &as_client, as_rank(next), deadline, next_peer, NULL);
    if (status == GC_OK) {
        ring->prev_fd = gc_ring_accept_prev(&listener, deadline);
        if (ring->prev_fd < 0) status = gc_last_status();
    }
    if (status == GC_OK) status = gc_auth_await_verdict(ring->next_fd, deadline, next_peer);
    gc_ring_listener_close(&listener);
    if (listen_fd >= 0) close(listen_fd);
    return status;
}
