/* The store's server (see store_server.h): one thread, poll() over the listening socket, a
 * wake-up pipe and the clients. A client's bytes are its hello, its proof, then requests;
 * each client has fixed buffers for them (the longest request; two of the longest replies),
 * so what a client sends never grows the server. A request is taken only when the longest
 * reply fits, and nothing is read while a request waits to be taken: a client that does not
 * read its replies stops being served, not the server. A client's GET of a key not set yet
 * is parked until a SET of that key arrives; its later requests wait behind it, so every
 * client sees its replies in order. Running out of host memory costs the connection that
 * needed it, never the server. */
#include "store_server.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "socket.h"
#include "store_protocol.h"

#define OUT_CAPACITY (2 * GC_STORE_REPLY_MAX)
/* bytes an entry is counted for beyond its key and value: the table's slot and malloc's own */
#define ENTRY_OVERHEAD 64
#define COUNTER_TEXT 24 /* an i64 in decimal and a NUL */
#define WHERE "store (rank 0)"

typedef struct entry {
    char *key;       /* NUL-terminated (keys hold no NUL) */
    size_t key_size;
    uint8_t *value;  /* NUL-terminated one past size */
    size_t size;
    bool counter;    /* made by ADD: value is count in decimal */
    int64_t count;
} entry;

typedef enum phase { AWAIT_HELLO, AWAIT_PROOF, SERVING } phase;

typedef struct client {
    int fd;                    /* -1 once closed */
    phase phase;
    double handshake_deadline; /* until SERVING */
    gc_auth auth;
    char peer[64];             /* "address:port", for the log */
    uint8_t *in, *out;         /* [GC_STORE_REQUEST_MAX], [OUT_CAPACITY] */
    size_t in_size, out_size;
    char *waiting;             /* [GC_STORE_KEY_MAX + 1]: the key of a parked GET */
    bool parked;
} client;

struct gc_store_server {
    int listen_fd, wake[2];
    pthread_t thread;
    gc_dist_secret secret;
    size_t max_clients, max_bytes, stored_bytes;
    double handshake_seconds;
    size_t authenticated;      /* clients past the handshake: the run's processes */
    bool stopping;
    double stop_deadline;
    pthread_mutex_t lock;      /* guards stopping and stop_deadline */
    entry *entries;
    size_t n_entries, entries_capacity;
    client *clients;
    struct pollfd *polls;      /* [2 + clients_capacity] */
    size_t n_clients, clients_capacity;
};

/* --- clients --- */

static void drop(client *c, const char *reason) {
    if (reason) gc_auth_log_refusal(WHERE, c->peer, reason);
    gc_socket_close(c->fd);
    c->fd = -1;
}

static void append(client *c, const void *data, size_t size) {
    memcpy(c->out + c->out_size, data, size);
    c->out_size += size;
}

static void consume(client *c, size_t size) {
    memmove(c->in, c->in + size, c->in_size - size);
    c->in_size -= size;
}

/* --- the table --- */

static entry *find(gc_store_server *server, const char *key, size_t key_size) {
    for (size_t i = 0; i < server->n_entries; i++)
        if (server->entries[i].key_size == key_size && memcmp(server->entries[i].key, key, key_size) == 0)
            return &server->entries[i];
    return NULL;
}

/* A new entry holding a copy of the value (value_capacity bytes reserved, at least size + 1);
 * NULL when the store is full (*full) or host memory is out. */
static entry *insert(gc_store_server *server, const gc_store_request *r, size_t value_capacity, bool *full) {
    size_t cost = r->key_size + value_capacity + ENTRY_OVERHEAD;
    *full = server->stored_bytes + cost > server->max_bytes;
    if (*full) return NULL;
    if (server->n_entries == server->entries_capacity) {
        size_t capacity = server->entries_capacity ? 2 * server->entries_capacity : 16;
        entry *grown = realloc(server->entries, capacity * sizeof *grown);
        if (!grown) return NULL;
        server->entries = grown;
        server->entries_capacity = capacity;
    }
    char *key = malloc(r->key_size + 1);
    uint8_t *value = malloc(value_capacity);
    if (!key || !value) {
        free(key);
        free(value);
        return NULL;
    }
    memcpy(key, r->key, r->key_size);
    key[r->key_size] = '\0';
    if (r->value_size) memcpy(value, r->value, r->value_size);
    value[r->value_size] = '\0';
    entry *e = &server->entries[server->n_entries++];
    *e = (entry){.key = key, .key_size = r->key_size, .value = value, .size = r->value_size};
    server->stored_bytes += cost;
    return e;
}

static void reply_value(client *c, const entry *e) {
    uint8_t header[9] = {GC_STORE_DONE};
    gc_store_put_u64(header + 1, e->size);
    append(c, header, sizeof header);
    append(c, e->value, e->size);
}

/* A key just set: the GETs parked on it are answered (their clients' later requests are
 * taken on the next pass of handle_all). */
static void release_waiters(gc_store_server *server, const entry *e) {
    for (size_t i = 0; i < server->n_clients; i++) {
        client *c = &server->clients[i];
        if (c->fd >= 0 && c->parked && strcmp(c->waiting, e->key) == 0) {
            reply_value(c, e);
            c->parked = false;
        }
    }
}

static void set(gc_store_server *server, client *c, const gc_store_request *r) {
    uint8_t reply = GC_STORE_REFUSED_SET; /* keys are written once */
    entry *e = NULL;
    if (!find(server, r->key, r->key_size)) {
        bool full;
        e = insert(server, r, r->value_size + 1, &full);
        if (!e && !full) {
            drop(c, "out of host memory for its SET");
            return;
        }
        reply = e ? GC_STORE_DONE : GC_STORE_REFUSED_FULL;
    }
    append(c, &reply, 1);
    if (e) release_waiters(server, e);
}

static void add(gc_store_server *server, client *c, const gc_store_request *r) {
    entry *e = find(server, r->key, r->key_size);
    uint8_t reply[9] = {GC_STORE_REFUSED_SET};
    if (!e) {
        bool full;
        gc_store_request empty = *r;
        empty.value_size = 0;
        e = insert(server, &empty, COUNTER_TEXT, &full);
        if (!e && !full) {
            drop(c, "out of host memory for its ADD");
            return;
        }
        if (!e) reply[0] = GC_STORE_REFUSED_FULL;
        else e->counter = true;
    }
    if (!e || !e->counter) {
        append(c, reply, 1);
        return;
    }
    e->count = (int64_t)((uint64_t)e->count + (uint64_t)r->delta); /* wraps instead of overflowing */
    e->size = (size_t)snprintf((char *)e->value, COUNTER_TEXT, "%" PRId64, e->count);
    reply[0] = GC_STORE_DONE;
    gc_store_put_u64(reply + 1, (uint64_t)e->count);
    append(c, reply, sizeof reply);
    release_waiters(server, e);
}

static void execute(gc_store_server *server, client *c, const gc_store_request *r) {
    entry *e = r->op == GC_STORE_SET || r->op == GC_STORE_ADD ? NULL : find(server, r->key, r->key_size);
    uint8_t present = e != NULL;
    if (r->op == GC_STORE_SET) {
        set(server, c, r);
    } else if (r->op == GC_STORE_ADD) {
        add(server, c, r);
    } else if (r->op == GC_STORE_CHECK) {
        append(c, &present, 1);
    } else if (e) {
        reply_value(c, e);
    } else {
        memcpy(c->waiting, r->key, r->key_size);
        c->waiting[r->key_size] = '\0';
        c->parked = true;
    }
}

/* --- a client's input --- */

static bool take_hello(gc_store_server *server, client *c) {
    if (!gc_auth_hello_plausible(c->in, c->in_size)) {
        drop(c, "not a gradcache handshake");
        return false;
    }
    if (c->in_size < GC_AUTH_HELLO_SIZE) return false;
    uint8_t challenge[GC_AUTH_CHALLENGE_SIZE];
    gc_auth_identity claimed, me = {GC_AUTH_STORE, 0};
    const char *problem;
    if (!gc_auth_challenge(&c->auth, &server->secret, c->in, me, &claimed, challenge, &problem)) {
        drop(c, problem);
        return false;
    }
    append(c, challenge, sizeof challenge);
    consume(c, GC_AUTH_HELLO_SIZE);
    c->phase = AWAIT_PROOF;
    return true;
}

static bool take_proof(gc_store_server *server, client *c) {
    if (c->in_size < GC_AUTH_PROOF_SIZE) return false;
    const char *problem;
    if (!gc_auth_verify(&c->auth, c->in, &problem)) {
        drop(c, problem);
        return false;
    }
    uint8_t accepted = 0;
    append(c, &accepted, 1);
    consume(c, GC_AUTH_PROOF_SIZE);
    c->phase = SERVING;
    server->authenticated++;
    return true;
}

/* Takes the next step of c's input, if it can: true when it did. */
static bool handle_input(gc_store_server *server, client *c) {
    if (c->fd < 0) return false;
    if (c->phase == AWAIT_HELLO) return take_hello(server, c);
    if (c->phase == AWAIT_PROOF) return take_proof(server, c);
    if (c->parked || c->in_size == 0 || OUT_CAPACITY - c->out_size < GC_STORE_REPLY_MAX) return false;
    gc_store_request r;
    const char *problem = NULL;
    long used = gc_store_parse_request(c->in, c->in_size, &r, &problem);
    if (used < 0) drop(c, problem); /* not our protocol: drop it, keep serving the others */
    if (used <= 0) return false;
    execute(server, c, &r);
    if (c->fd >= 0) consume(c, (size_t)used);
    return true;
}

/* Takes every client's input until no client can go on (a SET may release another's GET). */
static void handle_all(gc_store_server *server) {
    for (bool progress = true; progress;) {
        progress = false;
        for (size_t i = 0; i < server->n_clients; i++)
            while (handle_input(server, &server->clients[i])) progress = true;
    }
}

/* Moves bytes between a client's socket and its buffers. */
static void transfer(client *c, short revents) {
    bool closed = false;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) && c->in_size < GC_STORE_REQUEST_MAX) {
        long got = gc_socket_recv_some(c->fd, c->in + c->in_size, GC_STORE_REQUEST_MAX - c->in_size, &closed);
        if (got > 0) c->in_size += (size_t)got;
    }
    if (!closed && c->out_size) {
        long sent = gc_socket_send_some(c->fd, c->out, c->out_size, &closed);
        if (sent > 0) {
            memmove(c->out, c->out + sent, c->out_size - (size_t)sent);
            c->out_size -= (size_t)sent;
        }
    }
    if (closed) drop(c, c->phase == SERVING ? NULL : "it hung up during the handshake");
}

static void flush_replies(gc_store_server *server) {
    for (size_t i = 0; i < server->n_clients; i++)
        if (server->clients[i].fd >= 0 && server->clients[i].out_size) transfer(&server->clients[i], 0);
}

static void expire_handshakes(gc_store_server *server) {
    double now = gc_seconds();
    for (size_t i = 0; i < server->n_clients; i++) {
        client *c = &server->clients[i];
        if (c->fd >= 0 && c->phase != SERVING && now >= c->handshake_deadline) {
            char reason[96];
            snprintf(reason, sizeof reason, "no handshake within %g s", server->handshake_seconds);
            drop(c, reason);
        }
    }
}

static void drop_closed_clients(gc_store_server *server) {
    size_t kept = 0;
    for (size_t i = 0; i < server->n_clients; i++) {
        client *c = &server->clients[i];
        if (c->fd >= 0) {
            server->clients[kept++] = *c;
            continue;
        }
        if (c->phase == SERVING) server->authenticated--;
        free(c->in); /* one block: in, out and waiting */
    }
    server->n_clients = kept;
}

/* Room for one more client (and its poll slot); false without memory. */
static bool make_room(gc_store_server *server) {
    if (server->n_clients < server->clients_capacity) return true;
    size_t capacity = server->clients_capacity ? 2 * server->clients_capacity : 8;
    if (capacity > server->max_clients) capacity = server->max_clients;
    client *clients = realloc(server->clients, capacity * sizeof *clients);
    if (clients) server->clients = clients;
    struct pollfd *polls = clients ? realloc(server->polls, (2 + capacity) * sizeof *polls) : NULL;
    if (polls) server->polls = polls;
    if (!polls) return false;
    server->clients_capacity = capacity;
    return true;
}

/* Closes the connection that has waited longest without finishing the handshake, to make
 * room for a new one: strangers holding every place cannot lock the run's processes out
 * (theirs finish the handshake at once, and try again when turned away). False when every
 * place is held by a client past the handshake. */
static bool displace_oldest_stranger(gc_store_server *server) {
    client *oldest = NULL;
    for (size_t i = 0; i < server->n_clients; i++) {
        client *c = &server->clients[i];
        if (c->fd >= 0 && c->phase != SERVING && (!oldest || c->handshake_deadline < oldest->handshake_deadline))
            oldest = c;
    }
    if (!oldest) return false;
    drop(oldest, "displaced by newer connections before finishing the handshake");
    drop_closed_clients(server);
    return true;
}

static void accept_clients(gc_store_server *server) {
    /* at most half the places not held by the run per round: a connection accepted now keeps
     * its place until its hello has been read, however fast strangers arrive */
    size_t open_places = server->max_clients - server->authenticated;
    for (size_t accepted = 0; accepted < (open_places > 1 ? open_places / 2 : 1); accepted++) {
        int fd = gc_socket_accept(server->listen_fd, 0);
        if (fd < 0) return;
        client c = {.fd = fd, .handshake_deadline = gc_deadline_after(server->handshake_seconds)};
        gc_socket_peer(fd, c.peer, sizeof c.peer);
        if (server->n_clients >= server->max_clients && !displace_oldest_stranger(server)) {
            char reason[96];
            snprintf(reason, sizeof reason, "too many connections (at most %zu)", server->max_clients);
            drop(&c, reason);
            continue;
        }
        c.in = malloc(GC_STORE_REQUEST_MAX + OUT_CAPACITY + GC_STORE_KEY_MAX + 1);
        if (!c.in || !make_room(server)) {
            free(c.in);
            drop(&c, "out of host memory for one more connection");
            continue;
        }
        c.out = c.in + GC_STORE_REQUEST_MAX;
        c.waiting = (char *)c.out + OUT_CAPACITY;
        server->clients[server->n_clients++] = c;
    }
}

static bool should_stop(gc_store_server *server) {
    pthread_mutex_lock(&server->lock);
    bool stop = server->stopping && (server->authenticated == 0 || gc_ms_until(server->stop_deadline) == 0);
    pthread_mutex_unlock(&server->lock);
    return stop;
}

static void *serve(void *arg) {
    gc_store_server *server = arg;
    while (!should_stop(server)) {
        struct pollfd *polls = server->polls;
        polls[0] = (struct pollfd){.fd = server->listen_fd, .events = POLLIN};
        polls[1] = (struct pollfd){.fd = server->wake[0], .events = POLLIN};
        for (size_t i = 0; i < server->n_clients; i++) {
            client *c = &server->clients[i];
            short events = (short)((c->in_size < GC_STORE_REQUEST_MAX ? POLLIN : 0) | (c->out_size ? POLLOUT : 0));
            polls[i + 2] = (struct pollfd){.fd = c->fd, .events = events};
        }
        /* wakes at least every 100 ms, to notice the stop deadline and expired handshakes */
        if (poll(polls, server->n_clients + 2, 100) < 0 && errno != EINTR) break;
        if (polls[1].revents) {
            char drain[16];
            if (read(server->wake[0], drain, sizeof drain) < 0) { /* nothing to do: poll again */
            }
        }
        for (size_t i = 0; i < server->n_clients; i++)
            if (polls[i + 2].revents) transfer(&server->clients[i], polls[i + 2].revents);
        handle_all(server);
        flush_replies(server);
        expire_handshakes(server);
        drop_closed_clients(server);
        if (polls[0].revents) accept_clients(server);
    }
    return NULL;
}

gc_store_server *gc_store_server_start(const gc_store_server_options *options) {
    if (!options->secret || options->secret->size < GC_DIST_SECRET_MIN || options->world_size < 1)
        gc_fatal("store server: a secret of %zu bytes (at least %d) and a world of %d",
                 options->secret ? options->secret->size : 0, GC_DIST_SECRET_MIN, options->world_size);
    size_t max_clients = (size_t)options->world_size + GC_STORE_CONNECTION_MARGIN;
    int fd = gc_socket_listen(options->bind, options->port, (int)max_clients);
    if (fd < 0) return NULL;
    gc_store_server *server = calloc(1, sizeof *server);
    struct pollfd *polls = calloc(2, sizeof *polls);
    bool ready = server && polls && pipe(server->wake) == 0;
    if (ready) {
        server->listen_fd = fd;
        server->secret = *options->secret;
        server->max_clients = max_clients;
        server->max_bytes = max_clients * GC_STORE_BYTES_PER_CONNECTION;
        server->handshake_seconds = options->handshake_seconds > 0 ? options->handshake_seconds
                                                                   : GC_DIST_HANDSHAKE_SECONDS;
        server->polls = polls;
        pthread_mutex_init(&server->lock, NULL);
        ready = pthread_create(&server->thread, NULL, serve, server) == 0;
        if (!ready) {
            pthread_mutex_destroy(&server->lock);
            close(server->wake[0]);
            close(server->wake[1]);
        }
    }
    if (!ready) {
        gc_set_error(GC_ERR_IO, "store server: cannot start (no memory, pipe or thread): %s", strerror(errno));
        free(server);
        free(polls);
        close(fd);
        return NULL;
    }
    return server;
}

int gc_store_server_port(const gc_store_server *server) { return gc_socket_port(server->listen_fd); }

void gc_store_server_stop(gc_store_server *server, double deadline) {
    pthread_mutex_lock(&server->lock);
    server->stopping = true;
    server->stop_deadline = deadline;
    pthread_mutex_unlock(&server->lock);
    if (write(server->wake[1], "", 1) < 0) { /* the thread notices within 100 ms anyway */
    }
    pthread_join(server->thread, NULL);
    for (size_t i = 0; i < server->n_clients; i++) drop(&server->clients[i], NULL);
    drop_closed_clients(server);
    for (size_t i = 0; i < server->n_entries; i++) {
        free(server->entries[i].key);
        free(server->entries[i].value);
    }
    free(server->entries);
    free(server->clients);
    free(server->polls);
    gc_socket_close(server->listen_fd);
    close(server->wake[0]);
    close(server->wake[1]);
    pthread_mutex_destroy(&server->lock);
    free(server);
}
