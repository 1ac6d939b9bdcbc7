/* The store as an outsider on the network meets it (issue 23): a client that does not
 * prove the run's secret gets nothing -- no key read, no SET taken -- and is dropped; so is
 * one with a wrong secret; a key a rank published cannot be set again; a SET announcing a
 * 60 MiB value is refused at its length, before the server holds any of it; what even a
 * process of the run may store is bounded (world + margin places of 64 KiB); connections past
 * the bound displace the oldest strangers, and a process of the run still gets in; one that
 * never finishes the handshake is closed after the
 * limit and does not delay the server's stop; the server listens only on the interface it
 * was asked for, and one asked for an address that cannot serve MASTER_ADDR says so at once.
 * Every refusal is one line on stderr naming the address and the reason.
 * The server runs in this process (a short handshake limit); clients are raw sockets. */
#include <time.h>

#include "check.h"
#include "dist/auth.h"
#include "dist/socket.h"
#include "dist/store_protocol.h"
#include "dist/store_server.h"
#include "outside_address.h"

#define HANDSHAKE_LIMIT 1.0 /* seconds: the server's limit in these probes */
#define WORLD 2

static gc_dist_secret secret_of(char fill) {
    gc_dist_secret secret = {.size = 48};
    memset(secret.bytes, fill, secret.size);
    return secret;
}

static gc_store_server *start_server(const gc_dist_secret *secret, double handshake_seconds) {
    gc_store_server_options options = {.bind = "127.0.0.1", .port = 0, .world_size = WORLD, .secret = secret,
                                       .handshake_seconds = handshake_seconds};
    gc_store_server *server = gc_store_server_start(&options);
    REQUIRE(server);
    return server;
}

static gc_store *client_of(int port, const gc_dist_secret *secret) {
    gc_store_options options = {.host = "127.0.0.1", .port = port, .rank = 1, .world_size = WORLD, .secret = secret,
                                .timeout_seconds = 2};
    return gc_store_new(&options);
}

static int raw_connect(const char *host, int port, double seconds) {
    return gc_socket_connect(host, port, gc_deadline_after(seconds));
}

/* True when the server hangs up on fd within `seconds` having sent nothing more. */
static bool hung_up(int fd, double seconds) {
    uint8_t byte;
    if (gc_socket_recv_all(fd, &byte, 1, gc_deadline_after(seconds), "probe") == GC_OK) return false;
    return strstr(gc_last_error(), "timed out") == NULL;
}

static bool send_request(int fd, gc_store_op op, const char *key, const char *value) {
    gc_store_request request = {.op = op, .key = key, .key_size = strlen(key), .value = (const uint8_t *)value,
                                .value_size = value ? strlen(value) : 0};
    uint8_t bytes[GC_STORE_REQUEST_MAX];
    size_t size = gc_store_encode_request(&request, bytes);
    gc_status status = gc_socket_send_all(fd, bytes, size, gc_deadline_after(2), "probe");
    return status == GC_OK;
}

static bool is_set(gc_store *store, const char *key) {
    bool exists = true;
    CHECK(gc_store_check(store, key, &exists) == GC_OK);
    return exists;
}

/* Resident bytes of this process (the server's thread included). */
static long resident_bytes(void) {
    FILE *file = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!file || fscanf(file, "%ld %ld", &pages, &resident) != 2) resident = -1;
    if (file) fclose(file);
    return resident * sysconf(_SC_PAGESIZE);
}

/* Old protocol, no handshake: a SET of a rank's address and a GET, as the relay did. */
static void probe_unauthenticated(int port, gc_store *rank0) {
    int fd = raw_connect("127.0.0.1", port, 2);
    REQUIRE(fd >= 0);
    CHECK(send_request(fd, GC_STORE_SET, "gc/ring/address/1", "192.0.2.66:4242"));
    send_request(fd, GC_STORE_GET, "gc/ring/address/0", NULL); /* the server may have hung up already */
    CHECK_MSG(hung_up(fd, 2), "an unauthenticated client was answered or kept");
    gc_socket_close(fd);
    CHECK(!is_set(rank0, "gc/ring/address/1"));
}

/* A client with another secret: refused through the library, and a raw one that sends a
 * proof made with its secret (and then requests) is dropped without a verdict. */
static void probe_wrong_secret(int port, gc_store *rank0) {
    gc_dist_secret wrong = secret_of('w');
    CHECK(client_of(port, &wrong) == NULL);
    CHECK_MSG(strstr(gc_last_error(), "does not know the run's secret") != NULL, "%s", gc_last_error());

    int fd = raw_connect("127.0.0.1", port, 2);
    REQUIRE(fd >= 0);
    gc_auth auth;
    uint8_t hello[GC_AUTH_HELLO_SIZE], challenge[GC_AUTH_CHALLENGE_SIZE], proof[GC_SHA256_SIZE];
    const char *problem;
    REQUIRE(gc_auth_hello(&auth, &wrong, (gc_auth_identity){GC_AUTH_STORE, 1}, hello, &problem));
    CHECK(gc_socket_send_all(fd, hello, sizeof hello, gc_deadline_after(2), "probe") == GC_OK);
    CHECK(gc_socket_recv_all(fd, challenge, sizeof challenge, gc_deadline_after(2), "probe") == GC_OK);
    /* what a client with this secret would prove, whatever the server's MAC said */
    gc_hmac_sha256 mac;
    gc_hmac_sha256_init(&mac, wrong.bytes, wrong.size);
    gc_hmac_sha256_update(&mac, "gradcache client", 17);
    gc_hmac_sha256_update(&mac, hello, sizeof hello);
    gc_hmac_sha256_update(&mac, challenge, GC_AUTH_HELLO_SIZE);
    gc_hmac_sha256_final(&mac, proof);
    CHECK(gc_socket_send_all(fd, proof, sizeof proof, gc_deadline_after(2), "probe") == GC_OK);
    send_request(fd, GC_STORE_SET, "gc/ring/address/1", "192.0.2.66:4242");
    CHECK_MSG(hung_up(fd, 2), "a client with a wrong secret got a verdict or was kept");
    gc_socket_close(fd);
    CHECK(!is_set(rank0, "gc/ring/address/1"));
}

/* Rank 1 publishes its address; nobody -- rank 1 again, or another process of the run -- can
 * change it. */
static void probe_write_once(int port, gc_store *rank0, const gc_dist_secret *secret) {
    gc_store *rank1 = client_of(port, secret);
    REQUIRE(rank1);
    CHECK(gc_store_set(rank1, "gc/ring/address/1", "127.0.0.1:5000", 14) == GC_OK);
    CHECK(gc_store_set(rank1, "gc/ring/address/1", "127.0.0.1:6000", 14) == GC_ERR_FORMAT);
    CHECK(gc_store_set(rank0, "gc/ring/address/1", "192.0.2.66:4242", 15) == GC_ERR_FORMAT);
    CHECK(strstr(gc_last_error(), "is set already") != NULL);
    void *value;
    size_t size;
    CHECK(gc_store_get(rank0, "gc/ring/address/1", &value, &size) == GC_OK && size == 14 &&
          memcmp(value, "127.0.0.1:5000", 14) == 0);
    free(value);
    gc_store_free(rank1);
}

/* Sends `total` bytes of a value (a SET announcing 60 MiB) until the server hangs up. */
static size_t flood(int fd, size_t total) {
    static uint8_t chunk[1 << 20];
    size_t sent = 0;
    while (sent < total &&
           gc_socket_send_all(fd, chunk, sizeof chunk, gc_deadline_after(2), "probe flood") == GC_OK)
        sent += sizeof chunk;
    return sent;
}

/* Half-sent oversized SETs, from a client of the run and from a stranger: the server drops
 * them at the length and does not grow (measured while the connection is still open: a
 * server holding the bytes would free them only when the client goes). */
static void probe_oversized(int port, const gc_dist_secret *secret) {
    size_t announced = 60u << 20, sent_at_most = 32u << 20;
    uint8_t header[1 + 4 + 4 + 8] = {GC_STORE_SET, 4, 0, 0, 0, 'b', 'i', 'g', '!'};
    gc_store_put_u64(header + 9, announced);
    long before = resident_bytes(), grown = 0;
    for (int authenticated = 0; authenticated < 2; authenticated++) {
        int fd = raw_connect("127.0.0.1", port, 2);
        REQUIRE(fd >= 0);
        if (authenticated)
            REQUIRE(gc_auth_connect(fd, secret, (gc_auth_identity){GC_AUTH_STORE, 1},
                                    (gc_auth_identity){GC_AUTH_STORE, 0}, gc_deadline_after(2), "probe", NULL) == GC_OK);
        CHECK(gc_socket_send_all(fd, header, sizeof header, gc_deadline_after(2), "probe") == GC_OK);
        size_t sent = flood(fd, sent_at_most);
        CHECK_MSG(sent < sent_at_most, "the server took %zu bytes of a value announced as %zu", sent, announced);
        CHECK(hung_up(fd, 2));
        long now = resident_bytes() - before;
        grown = now > grown ? now : grown;
        gc_socket_close(fd);
    }
#ifndef GC_TEST_SHADOW_MEMORY /* else each byte the flood touches has shadow bytes too */
    CHECK_MSG(grown < (4 << 20), "the server grew by %ld bytes", grown);
#endif
    printf("oversized SETs: resident memory %+ld KiB\n", grown >> 10);
}

/* A process of the run storing keys of the longest value until the store is full: refused
 * (and told so) at the bound, then still served. */
static void probe_stored_bytes(int port, const gc_dist_secret *secret) {
    gc_store *store = client_of(port, secret);
    REQUIRE(store);
    static char value[GC_STORE_VALUE_MAX];
    memset(value, 'v', sizeof value);
    size_t bound = (WORLD + GC_STORE_CONNECTION_MARGIN) * (size_t)GC_STORE_BYTES_PER_CONNECTION, stored = 0;
    gc_status status = GC_OK;
    long before = resident_bytes();
    for (int i = 0; i < 4096 && status == GC_OK; i++) { /* 16 MiB, were nothing refused */
        char key[32];
        snprintf(key, sizeof key, "filler/%d", i);
        status = gc_store_set(store, key, value, sizeof value);
        if (status == GC_OK) stored += sizeof value;
    }
    CHECK_MSG(status == GC_ERR_FORMAT && strstr(gc_last_error(), "no room for key"), "after %zu bytes: %s", stored,
              gc_last_error());
    CHECK_MSG(stored <= bound && stored > bound / 2, "%zu bytes of values stored, the bound is %zu", stored, bound);
    bool exists;
    CHECK(gc_store_check(store, "filler/0", &exists) == GC_OK && exists);
    printf("stored bytes: %zu of values before the store was full (bound %zu), resident memory %+ld KiB\n", stored,
           bound, (resident_bytes() - before) >> 10);
    gc_store_free(store);
}

/* More connections than world + margin (to a server of its own, with the usual handshake
 * limit): the server keeps the bound, closing the oldest strangers at once; a process of the
 * run arriving when strangers hold every place still gets in; and they do not delay the
 * stop. */
static void probe_connection_bound(const gc_dist_secret *secret) {
    gc_store_server *server = start_server(secret, 0);
    int port = gc_store_server_port(server);
    gc_store *rank0 = client_of(port, secret);
    REQUIRE(rank0);
    enum { TRIES = WORLD + GC_STORE_CONNECTION_MARGIN + 20 };
    int fds[TRIES], closed = 0;
    for (int i = 0; i < TRIES; i++) fds[i] = raw_connect("127.0.0.1", port, 2);
    struct timespec moment = {0, 300 * 1000 * 1000};
    nanosleep(&moment, NULL);
    for (int i = 0; i < TRIES; i++) {
        uint8_t byte;
        bool gone;
        closed += fds[i] >= 0 && gc_socket_recv_some(fds[i], &byte, 1, &gone) < 0 && gone;
    }
    /* rank 0's own connection holds one of the places (a closing one of the probes before may
     * hold another a moment longer) */
    int kept = TRIES - closed, places = WORLD + GC_STORE_CONNECTION_MARGIN;
    CHECK_MSG(kept <= places - 1 && kept >= places - 3, "%d of %d connections were kept (%d places)", kept, TRIES,
              places);
    CHECK(gc_store_set(rank0, "still/served", "yes", 3) == GC_OK); /* the run goes on */
    gc_store *late = client_of(port, secret);
    CHECK_MSG(late != NULL, "a process of the run was locked out: %s", gc_last_error());
    CHECK(late && gc_store_set(late, "late/joined", "yes", 3) == GC_OK);
    gc_store_free(late);
    gc_store_free(rank0);
    double start = gc_seconds();
    gc_store_server_stop(server, gc_deadline_after(10));
    double stop = gc_seconds() - start;
    CHECK_MSG(stop < 0.5, "the stop took %.2f s with %d strangers connected", stop, kept);
    for (int i = 0; i < TRIES; i++) gc_socket_close(fds[i]);
}

/* A connection that says nothing is closed after the handshake limit, and one held open does
 * not delay the stop (rank 0's run used to wait for every connection until the timeout). */
static void probe_idle(gc_store_server *server, gc_store *rank0) {
    int port = gc_store_server_port(server);
    int fd = raw_connect("127.0.0.1", port, 2);
    REQUIRE(fd >= 0);
    double start = gc_seconds();
    CHECK(hung_up(fd, HANDSHAKE_LIMIT + 2));
    double closed_after = gc_seconds() - start;
    CHECK_MSG(closed_after > HANDSHAKE_LIMIT * 0.8 && closed_after < HANDSHAKE_LIMIT + 1, "closed after %.2f s",
              closed_after);
    gc_socket_close(fd);

    int idle = raw_connect("127.0.0.1", port, 2);
    REQUIRE(idle >= 0);
    gc_store_free(rank0); /* the run's last process leaves */
    start = gc_seconds();
    gc_store_server_stop(server, gc_deadline_after(10));
    double stop = gc_seconds() - start;
    CHECK_MSG(stop < 0.5, "the stop took %.2f s with an idle stranger connected", stop);
    printf("idle connection: closed after %.2f s; stop with one held open: %.3f s\n", closed_after, stop);
    gc_socket_close(idle);
}

/* Served for MASTER_ADDR 127.0.0.1, the store cannot be reached through another interface;
 * GC_DIST_BIND 0.0.0.0 (the operator's choice) opens it there. */
static void probe_interface(const gc_dist_secret *secret) {
    char outside[64];
    if (!outside_address(outside, sizeof outside)) {
        printf("interface: this machine has no address but loopback: not probed\n");
        return;
    }
    for (int everywhere = 0; everywhere < 2; everywhere++) {
        gc_store_options options = {.host = "127.0.0.1", .serve = true, .bind = everywhere ? "0.0.0.0" : NULL,
                                    .world_size = WORLD, .secret = secret, .timeout_seconds = 2};
        gc_store *store = gc_store_new(&options);
        REQUIRE(store);
        int fd = raw_connect(outside, gc_store_port(store), 0.3);
        CHECK_MSG((fd >= 0) == (everywhere == 1), "bound to %s: a connection to %s:%d %s",
                  everywhere ? "0.0.0.0" : "127.0.0.1", outside, gc_store_port(store),
                  fd >= 0 ? "got through" : "failed");
        gc_socket_close(fd);
        gc_store_free(store);
    }
}

/* GC_DIST_BIND 127.0.0.2 cannot serve MASTER_ADDR 127.0.0.1: rank 0 says so at once, naming
 * the variable, rather than at the timeout as a refused connection. */
static void probe_bind_cannot_serve(const gc_dist_secret *secret) {
    gc_store_options options = {.host = "127.0.0.1", .serve = true, .bind = "127.0.0.2", .world_size = WORLD,
                                .secret = secret, .timeout_seconds = 30};
    double start = gc_seconds();
    gc_store *store = gc_store_new(&options);
    double seconds = gc_seconds() - start;
    CHECK(store == NULL && gc_last_status() == GC_ERR_CONFIG);
    CHECK_MSG(strstr(gc_last_error(), "rank 0 cannot reach the store it serves on 127.0.0.2:") &&
                  strstr(gc_last_error(), "GC_DIST_BIND must be an address that MASTER_ADDR reaches"),
              "said: %s", gc_last_error());
    CHECK_MSG(seconds < 5, "refused after %.1f s (the timeout is 30 s)", seconds);
    gc_store_free(store);
}

/* The log of the refusals above: one line each (or a count, past the rate limit), naming
 * the address and the reason. */
static void check_log(const char *path) {
    FILE *file = fopen(path, "r");
    REQUIRE(file);
    char line[512];
    int refused = 0, bad = 0;
    const char *reasons[] = {"not a gradcache handshake", "wrong secret", "displaced by newer connections",
                             "value length out of range", "no handshake within 1 s"};
    bool seen[5] = {false};
    while (fgets(line, sizeof line, file)) {
        fputs(line, stdout);
        if (strncmp(line, "gradcache: store (rank 0): ", 27) != 0) continue;
        if (strstr(line, "more connections refused")) continue;
        refused++;
        bad += strstr(line, "refused 127.0.0.1:") == NULL;
        for (int i = 0; i < 5; i++) seen[i] |= strstr(line, reasons[i]) != NULL;
    }
    fclose(file);
    CHECK_MSG(refused > 0 && bad == 0, "%d refusals logged, %d without the address", refused, bad);
    for (int i = 0; i < 5; i++) CHECK_MSG(seen[i], "no refusal logged for '%s'", reasons[i]);
}

int main(void) {
    gc_dist_secret secret = secret_of('s');
    /* the server's log goes to a file, to be read back */
    char log_path[] = "/tmp/gc_store_probes_XXXXXX";
    int log_fd = mkstemp(log_path), saved_stderr = dup(STDERR_FILENO);
    REQUIRE(log_fd >= 0 && saved_stderr >= 0 && dup2(log_fd, STDERR_FILENO) >= 0);

    gc_store_server *server = start_server(&secret, HANDSHAKE_LIMIT);
    int port = gc_store_server_port(server);
    gc_store *rank0 = client_of(port, &secret);
    REQUIRE(rank0);
    /* each refused once before the log's rate limit (10 lines in 10 s) is reached */
    probe_unauthenticated(port, rank0);
    probe_wrong_secret(port, rank0);
    probe_write_once(port, rank0, &secret);
    probe_oversized(port, &secret);
    probe_stored_bytes(port, &secret);
    CHECK(gc_store_set(rank0, "still/served", "yes", 3) == GC_OK); /* the run goes on */
    probe_idle(server, rank0);
    probe_connection_bound(&secret);
    probe_interface(&secret);
    probe_bind_cannot_serve(&secret);

    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    check_log(log_path);
    unlink(log_path);
    return gc_test_result();
}
