/* The ring's connections are authenticated: a stranger who found rank 0's ring listener (its
 * address is in the store: here the stranger may read the store, the worst case) cannot reach
 * it through another interface than the one advertised (127.0.0.1); it connects first, claims
 * to be rank 2 (rank 0's previous in a world of 3) and sends a proof made with another secret
 * before the real rank 2 starts. Rank 0 refuses it with one line naming its address and the
 * reason, never sends it a verdict, and forms the ring with the real rank 2, whose all-reduce
 * then gives the right sum. Four processes: ranks 0 to 2 and the stranger. Then strangers that
 * connect and say nothing, more than the listener holds: the ring forms at once (silent_body).
 * Then a stranger that says hello as rank 1 (a hello needs no secret), takes its challenge and
 * keeps its proof back: the ring forms at once all the same (withholding_body). */
#include <fcntl.h>

#include "check.h"
#include "dist/auth.h"
#include "dist/socket.h"
#include "dist_spawn.h"
#include "gradcache/clock.h"
#include "outside_address.h"

#define TIMEOUT 20.0
#define STRANGER 3 /* the fourth process's "rank": it never joins */

static gc_store *store_client(int rank) {
    gc_dist_secret secret = {.size = strlen(DIST_TEST_SECRET)};
    memcpy(secret.bytes, DIST_TEST_SECRET, secret.size);
    gc_store_options options = {.host = "127.0.0.1", .port = atoi(getenv("MASTER_PORT")), .rank = rank,
                                .world_size = atoi(getenv("WORLD_SIZE")), .secret = &secret,
                                .timeout_seconds = TIMEOUT};
    gc_store *store = gc_store_new(&options);
    REQUIRE(store);
    return store;
}

static bool wait_for_key(gc_store *store, const char *key, char **value) {
    size_t size;
    return gc_store_get(store, key, (void **)value, &size) == GC_OK;
}

/* Rank 0's ring listener's port, from the store. */
static int ring_listener_port(gc_store *store, char *address, size_t size) {
    char *value = NULL;
    REQUIRE(wait_for_key(store, "gc/ring/address/0", &value));
    char *colon = strrchr(value, ':');
    REQUIRE(colon);
    *colon = '\0';
    snprintf(address, size, "%s", value);
    int port = atoi(colon + 1);
    free(value);
    return port;
}

/* Connects to rank 0's ring listener as "rank 2", with another secret; sends the hello, reads
 * the challenge, sends the proof and only then lets rank 2 start (so rank 0 has the proof
 * before rank 2's hello): the connection must be closed without a verdict. */
static int stranger(void) {
    gc_store *store = store_client(1);
    char address[64], outside[64];
    int port = ring_listener_port(store, address, sizeof address);
    if (outside_address(outside, sizeof outside)) { /* the listener is bound to the address advertised */
        int elsewhere = gc_socket_connect(outside, port, gc_deadline_after(0.3));
        CHECK_MSG(elsewhere < 0, "rank 0's ring listener (%s:%d) answered at %s", address, port, outside);
        gc_socket_close(elsewhere);
    }
    int fd = gc_socket_connect(address, port, gc_deadline_after(5));
    REQUIRE(fd >= 0);
    gc_dist_secret wrong = {.size = 40};
    memset(wrong.bytes, 'w', wrong.size);
    gc_auth auth;
    uint8_t hello[GC_AUTH_HELLO_SIZE], challenge[GC_AUTH_CHALLENGE_SIZE], proof[GC_AUTH_PROOF_SIZE];
    const char *problem;
    REQUIRE(gc_auth_hello(&auth, &wrong, (gc_auth_identity){GC_AUTH_RING, 2}, hello, &problem));
    CHECK(gc_socket_send_all(fd, hello, sizeof hello, gc_deadline_after(5), "hello") == GC_OK);
    CHECK(gc_socket_recv_all(fd, challenge, sizeof challenge, gc_deadline_after(TIMEOUT), "challenge") == GC_OK);
    gc_hmac_sha256 mac; /* what a process with this secret would prove */
    gc_hmac_sha256_init(&mac, wrong.bytes, wrong.size);
    gc_hmac_sha256_update(&mac, "gradcache client", 17);
    gc_hmac_sha256_update(&mac, hello, sizeof hello);
    gc_hmac_sha256_update(&mac, challenge, GC_AUTH_HELLO_SIZE);
    gc_hmac_sha256_final(&mac, proof);
    CHECK(gc_socket_send_all(fd, proof, sizeof proof, gc_deadline_after(5), "proof") == GC_OK);
    CHECK(gc_store_set(store, "probe/stranger_proved", "1", 1) == GC_OK);
    uint8_t verdict;
    CHECK_MSG(gc_socket_recv_all(fd, &verdict, 1, gc_deadline_after(TIMEOUT), "verdict") != GC_OK,
              "the stranger got a verdict %u", verdict);
    gc_socket_close(fd);
    gc_store_free(store);
    return gc_test_result();
}

static int body(int rank, int world, void *arg) {
    (void)world;
    if (rank == STRANGER) return stranger();
    if (rank == 2) { /* joins once the stranger's proof is at rank 0's door */
        gc_store *store = store_client(2);
        char *value = NULL;
        REQUIRE(wait_for_key(store, "probe/stranger_proved", &value));
        free(value);
        gc_store_free(store);
    }
    int log_fd = -1, saved = -1;
    if (rank == 0) { /* rank 0's stderr into the file, to be read back */
        log_fd = open((const char *)arg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        saved = dup(STDERR_FILENO);
        REQUIRE(log_fd >= 0 && saved >= 0 && dup2(log_fd, STDERR_FILENO) >= 0);
    }
    gc_process_group *group = dist_test_group(TIMEOUT);
    gc_tensor *t = gc_full(GC_SHAPE(1000), GC_F32, gc_cpu(), rank + 1);
    REQUIRE(t);
    CHECK(gc_dist_all_reduce(group, t, GC_DIST_SUM) == GC_OK);
    const float *sum = gc_data(t);
    CHECK(sum[0] == 6.0f && sum[999] == 6.0f);
    gc_tensor_release(t);
    gc_process_group_free(group);
    if (rank == 0) {
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(log_fd);
    }
    return gc_test_result();
}

/* The second run: a world of 3, whose rank 0 waits for rank 2 (its previous) while a stranger
 * holds SILENT connections to its listener, more than it keeps at once, and says nothing on
 * any. Rank 2 joins once they are open and must form the ring at once: not after a wait per
 * stranger (GC_DIST_HANDSHAKE_SECONDS each, served one at a time), nor locked out by a full
 * listener. */
#define SILENT (GC_STORE_CONNECTION_MARGIN + 4)
#define SILENT_STRANGER 3

static int silent_stranger(void) {
    gc_store *store = store_client(1);
    char address[64];
    int port = ring_listener_port(store, address, sizeof address), fds[SILENT];
    for (int i = 0; i < SILENT; i++) {
        fds[i] = gc_socket_connect(address, port, gc_deadline_after(5));
        CHECK_MSG(fds[i] >= 0, "silent connection %d: %s", i, gc_last_error());
    }
    CHECK(gc_store_set(store, "probe/strangers_wait", "1", 1) == GC_OK);
    char *formed = NULL;
    CHECK(wait_for_key(store, "probe/ring_formed", &formed));
    free(formed);
    for (int i = 0; i < SILENT; i++) gc_socket_close(fds[i]);
    gc_store_free(store);
    return gc_test_result();
}

/* A rank of a run past strangers: the last rank (world - 1) joins once the strangers have set
 * `key`, then must form the ring within half a handshake's time; it says so under
 * probe/ring_formed, which the strangers wait for before they let go. */
static int join_past_strangers(int rank, int world, const char *key, const char *strangers) {
    int last = world - 1;
    gc_store *store = rank == last ? store_client(last) : NULL;
    char *value = NULL;
    if (store) REQUIRE(wait_for_key(store, key, &value));
    free(value);
    double start = gc_seconds();
    gc_process_group *group = dist_test_group(TIMEOUT);
    gc_tensor *t = gc_full(GC_SHAPE(1000), GC_F32, gc_cpu(), rank + 1);
    REQUIRE(t);
    CHECK(gc_dist_all_reduce(group, t, GC_DIST_SUM) == GC_OK);
    CHECK(((const float *)gc_data(t))[999] == world * (world + 1) / 2.0f);
    double seconds = gc_seconds() - start;
    CHECK_MSG(rank != last || seconds < GC_DIST_HANDSHAKE_SECONDS / 2, "rank %d formed the ring past %s in %.1f s",
              last, strangers, seconds);
    if (store) CHECK(gc_store_set(store, "probe/ring_formed", "1", 1) == GC_OK);
    gc_tensor_release(t);
    gc_process_group_free(group);
    gc_store_free(store);
    return gc_test_result();
}

static int silent_body(int rank, int world, void *arg) {
    (void)arg;
    if (rank == SILENT_STRANGER) return silent_stranger();
    return join_past_strangers(rank, world, "probe/strangers_wait", "silent connections");
}

/* The third run: a world of 2, where a stranger says hello to rank 0 as rank 1 before rank 1
 * starts (so rank 0 challenges it first), reads its challenge and then says nothing, holding
 * the connection open until the ring has formed. Rank 0 must not wait for that proof (until
 * the run's deadline) before it hears the real rank 1's. */
#define WITHHOLDING_STRANGER 2

static int withholding_stranger(void) {
    gc_store *store = store_client(1);
    char address[64];
    int port = ring_listener_port(store, address, sizeof address);
    int fd = gc_socket_connect(address, port, gc_deadline_after(5));
    REQUIRE(fd >= 0);
    gc_auth auth;
    uint8_t hello[GC_AUTH_HELLO_SIZE], challenge[GC_AUTH_CHALLENGE_SIZE];
    const char *problem;
    gc_dist_secret none = {.size = 40}; /* any secret makes a hello */
    memset(none.bytes, 'n', none.size);
    REQUIRE(gc_auth_hello(&auth, &none, (gc_auth_identity){GC_AUTH_RING, 1}, hello, &problem));
    CHECK(gc_socket_send_all(fd, hello, sizeof hello, gc_deadline_after(5), "hello") == GC_OK);
    CHECK(gc_store_set(store, "probe/hello_sent", "1", 1) == GC_OK);
    CHECK(gc_socket_recv_all(fd, challenge, sizeof challenge, gc_deadline_after(TIMEOUT), "challenge") == GC_OK);
    char *formed = NULL;
    CHECK(wait_for_key(store, "probe/ring_formed", &formed));
    free(formed);
    gc_socket_close(fd);
    gc_store_free(store);
    return gc_test_result();
}

static int withholding_body(int rank, int world, void *arg) {
    (void)arg;
    if (rank == WITHHOLDING_STRANGER) return withholding_stranger();
    return join_past_strangers(rank, world, "probe/hello_sent", "a stranger keeping its proof back");
}

int main(void) {
    char log_path[] = "/tmp/gc_ring_auth_XXXXXX";
    int fd = mkstemp(log_path);
    REQUIRE(fd >= 0);
    close(fd);
    int ranks[] = {0, 1, 2, STRANGER}, status[4];
    double elapsed;
    CHECK(dist_run(3, ranks, 4, body, log_path, 60, status, &elapsed));
    for (int i = 0; i < 4; i++) CHECK_MSG(status[i] == 0, "process %d (rank %d) exited with %d", i, ranks[i], status[i]);
    FILE *log = fopen(log_path, "r");
    REQUIRE(log);
    char line[512];
    int refusals = 0;
    while (fgets(line, sizeof line, log)) {
        fputs(line, stdout);
        refusals += strncmp(line, "gradcache: rank 0, ring: refused 127.0.0.1:", 43) == 0 && strstr(line, "wrong secret");
    }
    fclose(log);
    unlink(log_path);
    CHECK_MSG(refusals == 1, "rank 0 logged %d refusals of the stranger", refusals);
    int silent_ranks[] = {0, 1, 2, SILENT_STRANGER}, silent_status[4];
    CHECK(dist_run(3, silent_ranks, 4, silent_body, NULL, 60, silent_status, &elapsed));
    for (int i = 0; i < 4; i++)
        CHECK_MSG(silent_status[i] == 0, "silent strangers: process %d exited with %d", i, silent_status[i]);
    int withholding_ranks[] = {0, 1, WITHHOLDING_STRANGER}, withholding_status[3];
    CHECK(dist_run(2, withholding_ranks, 3, withholding_body, NULL, 60, withholding_status, &elapsed));
    for (int i = 0; i < 3; i++)
        CHECK_MSG(withholding_status[i] == 0, "a withheld proof: process %d exited with %d", i, withholding_status[i]);
    return gc_test_result();
}
