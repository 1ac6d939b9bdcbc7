/* The rendezvous store: set/get/add/check between clients of one server, keys written once,
 * a get that waits for another client's set, a get that times out, empty and the longest
 * values, the longest key, counters, a client that sends garbage (dropped, the others still
 * served), and a client whose server is gone. Clients run in threads of this process. (What
 * the store refuses of outsiders: test_dist_store_probes.c.) */
#include <pthread.h>
#include <time.h>

#include "check.h"
#include "dist/socket.h"

/* Written once, read by every client thread (filling it at each call raced between them). */
static const gc_dist_secret *test_secret(void) {
    static const gc_dist_secret secret = {.size = 40, .bytes = "ssssssssssssssssssssssssssssssssssssssss"};
    return &secret;
}

/* A client of the store at port (serve: its server too, on port 0), in a world of 8. */
static gc_store *store_at(int port, bool serve, double timeout) {
    gc_store_options options = {.host = "127.0.0.1", .port = port, .serve = serve, .world_size = 8,
                                .secret = test_secret(), .timeout_seconds = timeout};
    return gc_store_new(&options);
}

typedef struct setter {
    int port;
    const char *key, *value;
    double delay;
} setter;

static void *set_later(void *arg) {
    setter *s = arg;
    gc_store *store = store_at(s->port, false, 10);
    struct timespec pause = {0, (long)(s->delay * 1e9)};
    nanosleep(&pause, NULL);
    if (store) gc_store_set(store, s->key, s->value, strlen(s->value));
    gc_store_free(store);
    return NULL;
}

static void *count_up(void *arg) {
    gc_store *store = store_at(*(int *)arg, false, 10);
    int64_t value;
    for (int i = 0; store && i < 100; i++) gc_store_add(store, "counter", 1, &value);
    gc_store_free(store);
    return NULL;
}

static bool get_text(gc_store *store, const char *key, const char *want) {
    void *value;
    size_t size;
    bool ok = gc_store_get(store, key, &value, &size) == GC_OK && size == strlen(want) && strcmp(value, want) == 0;
    free(value);
    return ok;
}

int main(void) {
    gc_store *server = store_at(0, true, 1.0);
    REQUIRE(server);
    int port = gc_store_port(server);
    gc_store *client = store_at(port, false, 1.0);
    REQUIRE(client);

    /* set, get, a second set refused (by any client), check */
    CHECK(gc_store_set(server, "a", "one", 3) == GC_OK);
    CHECK(get_text(client, "a", "one"));
    CHECK(gc_store_set(client, "a", "two!", 4) == GC_ERR_FORMAT && strstr(gc_last_error(), "'a' is set already"));
    CHECK(gc_store_set(server, "a", "one", 3) == GC_ERR_FORMAT);
    CHECK(get_text(server, "a", "one"));
    bool exists = false;
    CHECK(gc_store_check(client, "a", &exists) == GC_OK && exists);
    CHECK(gc_store_check(client, "absent", &exists) == GC_OK && !exists);
    CHECK(gc_store_set(client, "empty", "", 0) == GC_OK && get_text(server, "empty", ""));

    /* the longest key, and the longest value */
    char key[GC_STORE_KEY_MAX + 1];
    memset(key, 'k', GC_STORE_KEY_MAX);
    key[GC_STORE_KEY_MAX] = '\0';
    size_t big = GC_STORE_VALUE_MAX;
    char *value = malloc(big);
    REQUIRE(value);
    for (size_t i = 0; i < big; i++) value[i] = (char)(i * 31);
    CHECK(gc_store_set(client, key, value, big) == GC_OK);
    void *got;
    size_t size;
    CHECK(gc_store_get(server, key, &got, &size) == GC_OK && size == big && memcmp(got, value, big) == 0);
    free(got);
    free(value);

    /* a get waits for a set from another client */
    pthread_t thread;
    setter later = {port, "late", "here", 0.3};
    pthread_create(&thread, NULL, set_later, &later);
    CHECK(get_text(client, "late", "here"));
    pthread_join(thread, NULL);

    /* counters from four clients at once */
    pthread_t counters[4];
    for (int i = 0; i < 4; i++) pthread_create(&counters[i], NULL, count_up, &port);
    for (int i = 0; i < 4; i++) pthread_join(counters[i], NULL);
    int64_t total;
    CHECK(gc_store_add(client, "counter", 0, &total) == GC_OK && total == 400);
    CHECK(get_text(client, "counter", "400"));
    CHECK(gc_store_add(client, "a", 1, &total) == GC_ERR_FORMAT && strstr(gc_last_error(), "not hold a counter"));
    CHECK(gc_store_set(client, "counter", "1", 1) == GC_ERR_FORMAT && get_text(client, "counter", "400"));

    /* garbage from a raw connection: that client is dropped, the others are still served */
    int raw = gc_socket_connect("127.0.0.1", port, gc_deadline_after(1));
    REQUIRE(raw >= 0);
    const char garbage[] = "\x09GET / HTTP/1.1\r\n\r\n";
    CHECK(gc_socket_send_all(raw, garbage, sizeof garbage, gc_deadline_after(1), "garbage") == GC_OK);
    char byte;
    CHECK(gc_socket_recv_all(raw, &byte, 1, gc_deadline_after(1), "reply") == GC_ERR_PEER);
    CHECK(strstr(gc_last_error(), "closed") != NULL);
    gc_socket_close(raw);
    CHECK(get_text(client, "a", "one"));

    /* a get that is never answered times out, and leaves that connection unusable */
    double start = gc_seconds();
    CHECK(gc_store_get(client, "never", &got, &size) == GC_ERR_PEER);
    CHECK(strstr(gc_last_error(), "'never' was not set within 1 s") != NULL);
    CHECK(gc_seconds() - start < 2.0);
    CHECK(gc_store_set(client, "b", "x", 1) == GC_ERR_PEER && strstr(gc_last_error(), "unusable"));
    gc_store_free(client);

    /* the server gone: a client learns it at its next request */
    gc_store *orphan = store_at(port, false, 1.0);
    REQUIRE(orphan);
    gc_store_free(server);
    CHECK(gc_store_set(orphan, "x", "y", 1) == GC_ERR_PEER);
    gc_store_free(orphan);
    return gc_test_result();
}
