/* The store's server (see store_server.h): one thread, poll() over the listening socket, a
 * wake-up pipe and the clients. A client's GET of a key not set yet is parked until a SET
 * of that key arrives; its later requests wait behind it, so every client sees its replies
 * in order. */
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

#include "gradcache/dist.h"
#include "socket.h"
#include "store_protocol.h"

typedef struct entry {
    char *key;
    uint8_t *value;
    size_t size;
} entry;

/* Bytes waiting to be handled (input) or sent (output). */
typedef struct buffer {
    uint8_t *data;
    size_t size, capacity;
} buffer;

typedef struct client {
    int fd;
    buffer in, out;
    char *waiting_key; /* a parked GET */
} client;

struct gc_store_server {
    int listen_fd, wake[2];
    pthread_t thread;
    bool stopping;
    double stop_deadline;
    pthread_mutex_t lock; /* guards stopping and stop_deadline */
    entry *entries;
    size_t n_entries, entries_capacity;
    client *clients;
    size_t n_clients, clients_capacity;
};

static void *grow(void *items, size_t *capacity, size_t needed, size_t item_size) {
    if (needed <= *capacity) return items;
    size_t capacity_new = *capacity ? *capacity : 8;
    while (capacity_new < needed) capacity_new *= 2;
    void *grown = realloc(items, capacity_new * item_size);
    if (!grown) gc_fatal("store server: out of host memory (%zu items)", capacity_new);
    *capacity = capacity_new;
    return grown;
}

static void buffer_append(buffer *b, const void *data, size_t size) {
    b->data = grow(b->data, &b->capacity, b->size + size, 1);
    memcpy(b->data + b->size, data, size);
    b->size += size;
}

static void buffer_consume(buffer *b, size_t size) {
    memmove(b->data, b->data + size, b->size - size);
    b->size -= size;
}

static entry *find(gc_store_server *server, const char *key, size_t key_size) {
    for (size_t i = 0; i < server->n_entries; i++)
        if (strlen(server->entries[i].key) == key_size && memcmp(server->entries[i].key, key, key_size) == 0)
            return &server->entries[i];
    return NULL;
}

static char *copy_text(const void *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) gc_fatal("store server: out of host memory (%zu bytes)", size);
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

static void put(gc_store_server *server, const char *key, size_t key_size, const void *value, size_t size) {
    entry *e = find(server, key, key_size);
    if (!e) {
        server->entries = grow(server->entries, &server->entries_capacity, server->n_entries + 1, sizeof *e);
        e = &server->entries[server->n_entries++];
        e->key = copy_text(key, key_size);
    } else {
        free(e->value);
    }
    e->value = (uint8_t *)copy_text(value, size);
    e->size = size;
}

static void reply_value(client *c, const entry *e) {
    uint8_t header[9] = {0};
    gc_store_put_u64(header + 1, e->size);
    buffer_append(&c->out, header, sizeof header);
    buffer_append(&c->out, e->value, e->size);
}

/* ADD: the counter's new value, or false when the key holds something else. */
static bool add(gc_store_server *server, const gc_store_request *r, int64_t *sum) {
    entry *e = find(server, r->key, r->key_size);
    int64_t value = 0;
    if (e) {
        char *end;
        errno = 0;
        long long parsed = strtoll((const char *)e->value, &end, 10);
        if (errno || end == (const char *)e->value || *end) return false;
        value = parsed;
    }
    *sum = (int64_t)((uint64_t)value + (uint64_t)r->delta); /* wraps instead of overflowing */
    char text[32];
    int length = snprintf(text, sizeof text, "%" PRId64, *sum);
    put(server, r->key, r->key_size, text, (size_t)length);
    return true;
}

static void handle_input(gc_store_server *server, client *c);

/* A SET of `key` releases the GETs parked on it (and whatever those clients sent after). */
static void release_waiters(gc_store_server *server, const char *key) {
    for (size_t i = 0; i < server->n_clients; i++) {
        client *c = &server->clients[i];
        if (c->waiting_key && strcmp(c->waiting_key, key) == 0) {
            reply_value(c, find(server, key, strlen(key)));
            free(c->waiting_key);
            c->waiting_key = NULL;
            handle_input(server, c);
        }
    }
}

/* Handles the complete requests in c's input until a GET parks. A client that sends
 * something that is not a request is disconnected. */
static void handle_input(gc_store_server *server, client *c) {
    while (!c->waiting_key && c->fd >= 0) {
        gc_store_request r;
        const char *problem = NULL;
        long used = gc_store_parse_request(c->in.data, c->in.size, &r, &problem);
        if (used == 0) return;
        if (used < 0) { /* not our protocol: drop the connection, keep serving the others */
            gc_socket_close(c->fd);
            c->fd = -1;
            return;
        }
        uint8_t ok = 0;
        char *key = copy_text(r.key, r.key_size);
        if (r.op == GC_STORE_SET) {
            put(server, r.key, r.key_size, r.value, r.value_size);
            buffer_append(&c->out, &ok, 1);
        } else if (r.op == GC_STORE_GET) {
            entry *e = find(server, r.key, r.key_size);
            if (e) reply_value(c, e);
            else c->waiting_key = copy_text(r.key, r.key_size);
        } else if (r.op == GC_STORE_ADD) {
            int64_t sum;
            uint8_t reply[9] = {1};
            if (add(server, &r, &sum)) {
                reply[0] = 0;
                gc_store_put_u64(reply + 1, (uint64_t)sum);
            }
            buffer_append(&c->out, reply, reply[0] ? 1 : 9);
        } else { /* CHECK */
            uint8_t present = find(server, r.key, r.key_size) != NULL;
            buffer_append(&c->out, &present, 1);
        }
        buffer_consume(&c->in, (size_t)used);
        if (r.op == GC_STORE_SET || r.op == GC_STORE_ADD) release_waiters(server, key);
        free(key);
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
        free(c->in.data);
        free(c->out.data);
        free(c->waiting_key);
    }
    server->n_clients = kept;
}

static void accept_clients(gc_store_server *server) {
    for (;;) {
        int fd = gc_socket_accept(server->listen_fd, 0);
        if (fd < 0) return;
        server->clients = grow(server->clients, &server->clients_capacity, server->n_clients + 1, sizeof(client));
        server->clients[server->n_clients++] = (client){.fd = fd};
    }
}

/* Moves bytes between a client's socket and its buffers. */
static void serve_client(gc_store_server *server, client *c, short revents) {
    bool closed = false;
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t chunk[65536];
        long got = gc_socket_recv_some(c->fd, chunk, sizeof chunk, &closed);
        if (got > 0) {
            buffer_append(&c->in, chunk, (size_t)got);
            handle_input(server, c);
        }
    }
    if (!closed && c->fd >= 0 && c->out.size) {
        long sent = gc_socket_send_some(c->fd, c->out.data, c->out.size, &closed);
        if (sent > 0) buffer_consume(&c->out, (size_t)sent);
    }
    if (closed && c->fd >= 0) {
        gc_socket_close(c->fd);
        c->fd = -1;
    }
}

static bool should_stop(gc_store_server *server) {
    pthread_mutex_lock(&server->lock);
    bool stop = server->stopping && (server->n_clients == 0 || gc_ms_until(server->stop_deadline) == 0);
    pthread_mutex_unlock(&server->lock);
    return stop;
}

static void *serve(void *arg) {
    gc_store_server *server = arg;
    struct pollfd *polls = NULL;
    size_t polls_capacity = 0;
    while (!should_stop(server)) {
        polls = grow(polls, &polls_capacity, server->n_clients + 2, sizeof *polls);
        polls[0] = (struct pollfd){.fd = server->listen_fd, .events = POLLIN};
        polls[1] = (struct pollfd){.fd = server->wake[0], .events = POLLIN};
        for (size_t i = 0; i < server->n_clients; i++)
            polls[i + 2] = (struct pollfd){.fd = server->clients[i].fd,
                                           .events = (short)(POLLIN | (server->clients[i].out.size ? POLLOUT : 0))};
        /* wakes at least every 100 ms, to notice the stop deadline */
        if (poll(polls, server->n_clients + 2, 100) < 0 && errno != EINTR) break;
        if (polls[1].revents) {
            char drain[16];
            if (read(server->wake[0], drain, sizeof drain) < 0) { /* nothing to do: poll again */
            }
        }
        size_t n = server->n_clients; /* clients accepted below are polled next round */
        for (size_t i = 0; i < n; i++)
            if (polls[i + 2].revents) serve_client(server, &server->clients[i], polls[i + 2].revents);
        drop_closed_clients(server);
        if (polls[0].revents) accept_clients(server);
    }
    free(polls);
    return NULL;
}

gc_store_server *gc_store_server_start(int port) {
    int fd = gc_socket_listen(NULL, port, 1024);
    if (fd < 0) return NULL;
    gc_store_server *server = calloc(1, sizeof *server);
    if (!server) gc_fatal("store server: out of host memory");
    server->listen_fd = fd;
    if (pipe(server->wake) != 0) gc_fatal("store server: cannot create a pipe");
    pthread_mutex_init(&server->lock, NULL);
    if (pthread_create(&server->thread, NULL, serve, server) != 0) gc_fatal("store server: cannot start its thread");
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
    for (size_t i = 0; i < server->n_clients; i++) {
        gc_socket_close(server->clients[i].fd);
        server->clients[i].fd = -1;
    }
    drop_closed_clients(server);
    for (size_t i = 0; i < server->n_entries; i++) {
        free(server->entries[i].key);
        free(server->entries[i].value);
    }
    free(server->entries);
    free(server->clients);
    gc_socket_close(server->listen_fd);
    close(server->wake[0]);
    close(server->wake[1]);
    pthread_mutex_destroy(&server->lock);
    free(server);
}
