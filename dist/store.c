/* The store's client (include/gradcache/dist.h): one connection, authenticated both ways
 * (auth.h), one request at a time, each reply awaited until the store's timeout. Rank 0 also
 * owns the server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "gradcache/dist.h"
#include "group_internal.h"
#include "socket.h"
#include "store_protocol.h"
#include "store_server.h"

/* How long rank 0 tries to reach the store it serves itself (a listener already up). */
#define SELF_CONNECT_SECONDS 2.0

struct gc_store {
    int fd;
    int port;                /* the server's */
    double timeout;
    bool broken;             /* a reply went missing: the stream is out of step */
    char endpoint[GC_DIST_ADDR_MAX + 8];
    gc_store_server *server; /* rank 0 only */
};

gc_store *gc_store_new(const gc_store_options *options) {
    const gc_dist_secret *secret = options->secret;
    if (!secret || secret->size < GC_DIST_SECRET_MIN)
        gc_fatal("store: a secret of %zu bytes (at least %d are needed)", secret ? secret->size : 0, GC_DIST_SECRET_MIN);
    const char *target = options->host && *options->host ? options->host : "127.0.0.1";
    int port = options->port;
    gc_store_server *server = NULL;
    if (options->serve) {
        gc_store_server_options serving = {.bind = options->bind ? options->bind : target, .port = port,
                                           .world_size = options->world_size, .secret = secret};
        server = gc_store_server_start(&serving);
        if (!server) {
            gc_set_error(gc_last_status(), "the store: %s (is another run using port %d? is %s an address of this "
                         "machine? GC_DIST_BIND names the interface to listen on)", gc_last_error(), port, serving.bind);
            return NULL;
        }
        port = gc_store_server_port(server);
    }
    gc_store *store = calloc(1, sizeof *store);
    if (!store) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "store: out of host memory");
        if (server) gc_store_server_stop(server, 0);
        return NULL;
    }
    *store = (gc_store){.fd = -1, .port = port, .timeout = options->timeout_seconds, .server = server};
    snprintf(store->endpoint, sizeof store->endpoint, "%s:%d", target, port);
    double deadline = gc_deadline_after(options->timeout_seconds);
    /* rank 0's own server listens already: a connection to it succeeds at once or never (its
     * bind address does not serve MASTER_ADDR), so it gets a moment, not the whole timeout */
    double connect_deadline = server ? gc_deadline_after(SELF_CONNECT_SECONDS) : deadline;
    if (connect_deadline > deadline) connect_deadline = deadline;
    gc_auth_identity me = {GC_AUTH_STORE, (uint32_t)options->rank}, server_identity = {GC_AUTH_STORE, 0};
    gc_status status = GC_ERR_PEER;
    /* a server crowded by strangers may turn this connection away before the handshake (it
     * closes the oldest of them to make room): try again, until the timeout */
    bool turned_away = false;
    do {
        gc_socket_close(store->fd);
        store->fd = gc_socket_connect(target, port, connect_deadline);
        if (store->fd < 0) break;
        connect_deadline = deadline; /* it is reachable: a retry of a turned-away one may wait */
        status = gc_auth_connect(store->fd, secret, me, server_identity, deadline, store->endpoint, &turned_away);
        struct timespec pause = {0, 50 * 1000 * 1000};
        if (status != GC_OK && turned_away) nanosleep(&pause, NULL);
    } while (status != GC_OK && turned_away && gc_ms_until(deadline) > 0);
    if (store->fd < 0 && server) {
        gc_set_error(GC_ERR_CONFIG, "the store: rank 0 cannot reach the store it serves on %s:%d at %s: %s "
                     "(GC_DIST_BIND must be an address that MASTER_ADDR reaches: MASTER_ADDR itself, or 0.0.0.0)",
                     options->bind ? options->bind : target, port, store->endpoint, gc_last_error());
        gc_store_server_stop(server, 0);
        free(store);
        return NULL;
    }
    if (store->fd < 0 || status != GC_OK) {
        gc_set_error(gc_last_status(), "the store (rank 0): %s", gc_last_error());
        gc_socket_close(store->fd);
        if (server) gc_store_server_stop(server, 0);
        free(store);
        return NULL;
    }
    return store;
}

int gc_store_port(const gc_store *store) { return store->port; }

void gc_store_local_address(const gc_store *store, char *address, size_t size) {
    gc_socket_address(store->fd, address, size);
}

void gc_store_free(gc_store *store) {
    if (!store) return;
    gc_socket_close(store->fd);
    if (store->server) gc_store_server_stop(store->server, gc_deadline_after(store->timeout));
    free(store);
}

/* Sends a request and reads the first byte of its reply. */
static gc_status exchange(gc_store *store, const gc_store_request *request, uint8_t *status, double deadline) {
    char what[GC_STORE_KEY_MAX + 128];
    snprintf(what, sizeof what, "store at %s, key '%.*s'", store->endpoint, (int)request->key_size, request->key);
    if (store->broken) {
        gc_set_error(GC_ERR_PEER, "%s: an earlier request timed out, the connection is unusable", what);
        return GC_ERR_PEER;
    }
    uint8_t bytes[GC_STORE_REQUEST_MAX];
    size_t size = gc_store_encode_request(request, bytes);
    gc_status result = gc_socket_send_all(store->fd, bytes, size, deadline, what);
    if (result == GC_OK) result = gc_socket_recv_all(store->fd, status, 1, deadline, what);
    if (result != GC_OK) store->broken = true;
    return result;
}

static gc_store_request request_for(gc_store_op op, const char *key) {
    return (gc_store_request){.op = op, .key = key, .key_size = strlen(key)};
}

/* A SET's or ADD's refusal as an error. */
static gc_status refusal(const gc_store *store, const char *key, gc_store_op op, uint8_t status) {
    if (status == GC_STORE_REFUSED_SET && op == GC_STORE_SET)
        gc_set_error(GC_ERR_FORMAT, "store at %s: key '%s' is set already (keys are written once)", store->endpoint, key);
    else if (status == GC_STORE_REFUSED_SET)
        gc_set_error(GC_ERR_FORMAT, "store at %s: key '%s' does not hold a counter (it was set)", store->endpoint, key);
    else if (status == GC_STORE_REFUSED_FULL)
        gc_set_error(GC_ERR_FORMAT, "store at %s: no room for key '%s' (the store holds at most %u bytes per process)",
                     store->endpoint, key, GC_STORE_BYTES_PER_CONNECTION);
    else
        gc_set_error(GC_ERR_PEER, "store at %s: a reply %u for '%s' is not from a gradcache store", store->endpoint,
                     status, key);
    return gc_last_status();
}

gc_status gc_store_set(gc_store *store, const char *key, const void *value, size_t size) {
    gc_store_request request = request_for(GC_STORE_SET, key);
    request.value = value;
    request.value_size = size;
    uint8_t status;
    gc_status outcome = exchange(store, &request, &status, gc_deadline_after(store->timeout));
    if (outcome == GC_OK && status != GC_STORE_DONE) return refusal(store, key, GC_STORE_SET, status);
    return outcome;
}

gc_status gc_store_get(gc_store *store, const char *key, void **value, size_t *size) {
    *value = NULL;
    *size = 0;
    gc_store_request request = request_for(GC_STORE_GET, key);
    double deadline = gc_deadline_after(store->timeout);
    uint8_t header[8], status;
    gc_status result = exchange(store, &request, &status, deadline);
    if (result == GC_OK) result = gc_socket_recv_all(store->fd, header, sizeof header, deadline, key);
    uint64_t length = result == GC_OK ? gc_store_get_u64(header) : 0;
    if (result == GC_OK && length > GC_STORE_VALUE_MAX) {
        gc_set_error(GC_ERR_PEER, "store at %s: a reply of %llu bytes for '%s' is not from a gradcache store",
                     store->endpoint, (unsigned long long)length, key);
        result = GC_ERR_PEER;
    }
    uint8_t received[GC_STORE_VALUE_MAX];
    if (result == GC_OK) result = gc_socket_recv_all(store->fd, received, (size_t)length, deadline, key);
    if (result != GC_OK) {
        store->broken = true;
        if (strstr(gc_last_error(), "timed out"))
            gc_set_error(GC_ERR_PEER, "store at %s: key '%s' was not set within %g s (a peer never arrived?)",
                         store->endpoint, key, store->timeout);
        return GC_ERR_PEER;
    }
    char *bytes = malloc((size_t)length + 1); /* the reply is read whole: the connection stays usable */
    if (!bytes) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "store: out of host memory for the %llu bytes of '%s'",
                     (unsigned long long)length, key);
        return GC_ERR_OUT_OF_MEMORY;
    }
    if (length) memcpy(bytes, received, (size_t)length);
    bytes[length] = '\0';
    *value = bytes;
    *size = (size_t)length;
    return GC_OK;
}

gc_status gc_store_add(gc_store *store, const char *key, int64_t delta, int64_t *result) {
    gc_store_request request = request_for(GC_STORE_ADD, key);
    request.delta = delta;
    double deadline = gc_deadline_after(store->timeout);
    uint8_t status, sum[8];
    gc_status outcome = exchange(store, &request, &status, deadline);
    if (outcome != GC_OK) return outcome;
    if (status != GC_STORE_DONE) return refusal(store, key, GC_STORE_ADD, status);
    outcome = gc_socket_recv_all(store->fd, sum, sizeof sum, deadline, key);
    if (outcome != GC_OK) {
        store->broken = true;
        return outcome;
    }
    *result = (int64_t)gc_store_get_u64(sum);
    return GC_OK;
}

gc_status gc_store_check(gc_store *store, const char *key, bool *exists) {
    gc_store_request request = request_for(GC_STORE_CHECK, key);
    uint8_t status = 0;
    gc_status outcome = exchange(store, &request, &status, gc_deadline_after(store->timeout));
    *exists = outcome == GC_OK && status == 1;
    return outcome;
}
