/* The handshake (see auth.h). */
#include "auth.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "secret.h"
#include "socket.h"

static const uint8_t MAGIC[8] = {'G', 'C', 'A', 'U', 'T', 'H', '1', '\0'};

static void put_u32(uint8_t *out, uint32_t value) {
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(value >> (8 * i));
}

static uint32_t get_u32(const uint8_t *in) {
    return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
}

/* magic, purpose, rank, a fresh nonce: the first GC_AUTH_HELLO_SIZE bytes of a hello or a
 * challenge. */
static bool introduce(gc_auth_identity me, uint8_t out[GC_AUTH_HELLO_SIZE], const char **problem) {
    memcpy(out, MAGIC, sizeof MAGIC);
    put_u32(out + 8, me.purpose);
    put_u32(out + 12, me.rank);
    if (gc_dist_random_bytes(out + 16, GC_AUTH_NONCE_SIZE) != GC_OK) {
        *problem = "the system has no random bytes for a nonce";
        return false;
    }
    return true;
}

static gc_auth_identity identity_of(const uint8_t in[GC_AUTH_HELLO_SIZE]) {
    return (gc_auth_identity){get_u32(in + 8), get_u32(in + 12)};
}

/* HMAC(secret, label || hello || challenge without its MAC); the labels are NUL-terminated,
 * so neither is a prefix of the other. */
static void transcript_mac(const gc_auth *auth, const char *label, uint8_t out[GC_SHA256_SIZE]) {
    gc_hmac_sha256 mac;
    gc_hmac_sha256_init(&mac, auth->secret->bytes, auth->secret->size);
    gc_hmac_sha256_update(&mac, label, strlen(label) + 1);
    gc_hmac_sha256_update(&mac, auth->hello, sizeof auth->hello);
    gc_hmac_sha256_update(&mac, auth->challenge, sizeof auth->challenge);
    gc_hmac_sha256_final(&mac, out);
}

bool gc_auth_hello(gc_auth *auth, const gc_dist_secret *secret, gc_auth_identity me, uint8_t out[GC_AUTH_HELLO_SIZE],
                   const char **problem) {
    auth->secret = secret;
    if (!introduce(me, auth->hello, problem)) return false;
    memcpy(out, auth->hello, GC_AUTH_HELLO_SIZE);
    return true;
}

bool gc_auth_hello_plausible(const uint8_t *data, size_t size) {
    return memcmp(data, MAGIC, size < sizeof MAGIC ? size : sizeof MAGIC) == 0;
}

bool gc_auth_challenge(gc_auth *auth, const gc_dist_secret *secret, const uint8_t hello[GC_AUTH_HELLO_SIZE],
                       gc_auth_identity me, gc_auth_identity *claimed, uint8_t out[GC_AUTH_CHALLENGE_SIZE],
                       const char **problem) {
    if (!gc_auth_hello_plausible(hello, GC_AUTH_HELLO_SIZE)) {
        *problem = "not a gradcache handshake";
        return false;
    }
    *claimed = identity_of(hello);
    if (claimed->purpose != me.purpose) {
        *problem = "a handshake for another kind of connection";
        return false;
    }
    auth->secret = secret;
    memcpy(auth->hello, hello, GC_AUTH_HELLO_SIZE);
    if (!introduce(me, auth->challenge, problem)) return false;
    memcpy(out, auth->challenge, GC_AUTH_HELLO_SIZE);
    transcript_mac(auth, "gradcache server", out + GC_AUTH_HELLO_SIZE);
    return true;
}

bool gc_auth_prove(gc_auth *auth, const uint8_t challenge[GC_AUTH_CHALLENGE_SIZE], gc_auth_identity expected,
                   uint8_t out[GC_AUTH_PROOF_SIZE], const char **problem) {
    if (!gc_auth_hello_plausible(challenge, GC_AUTH_HELLO_SIZE)) {
        *problem = "not a gradcache handshake";
        return false;
    }
    memcpy(auth->challenge, challenge, GC_AUTH_HELLO_SIZE);
    uint8_t want[GC_SHA256_SIZE];
    transcript_mac(auth, "gradcache server", want);
    if (!gc_equal_constant_time(want, challenge + GC_AUTH_HELLO_SIZE, sizeof want)) {
        *problem = "it does not know the run's secret (another GC_DIST_SECRET_FILE, or not this run)";
        return false;
    }
    gc_auth_identity theirs = identity_of(challenge);
    if (theirs.purpose != expected.purpose || theirs.rank != expected.rank) {
        *problem = "it is not the process expected there (another rank or kind of connection)";
        return false;
    }
    transcript_mac(auth, "gradcache client", out);
    return true;
}

bool gc_auth_verify(const gc_auth *auth, const uint8_t proof[GC_AUTH_PROOF_SIZE], const char **problem) {
    uint8_t want[GC_SHA256_SIZE];
    transcript_mac(auth, "gradcache client", want);
    if (gc_equal_constant_time(want, proof, sizeof want)) return true;
    *problem = "wrong secret (its proof does not match)";
    return false;
}

/* --- over a socket --- */

static gc_status refused(const char *peer, const char *problem) {
    gc_set_error(GC_ERR_PEER, "the handshake with %s failed: %s", peer, problem);
    return GC_ERR_PEER;
}

/* A message of `size` bytes, or GC_ERR_PEER naming the step. */
static gc_status receive(int fd, void *data, size_t size, double deadline, const char *peer, const char *step) {
    char what[320];
    snprintf(what, sizeof what, "the handshake with %s (%s)", peer, step);
    return gc_socket_recv_all(fd, data, size, deadline, what);
}

static gc_status send_message(int fd, const void *data, size_t size, double deadline, const char *peer,
                              const char *step) {
    char what[320];
    snprintf(what, sizeof what, "the handshake with %s (%s)", peer, step);
    return gc_socket_send_all(fd, data, size, deadline, what);
}

gc_status gc_auth_send_hello(int fd, gc_auth *auth, const gc_dist_secret *secret, gc_auth_identity me, double deadline,
                             const char *peer) {
    uint8_t hello[GC_AUTH_HELLO_SIZE];
    const char *problem;
    if (!gc_auth_hello(auth, secret, me, hello, &problem)) return refused(peer, problem);
    return send_message(fd, hello, sizeof hello, deadline, peer, "hello");
}

gc_status gc_auth_answer(int fd, gc_auth *auth, gc_auth_identity expected, double deadline, const char *peer,
                         bool *turned_away) {
    uint8_t challenge[GC_AUTH_CHALLENGE_SIZE], proof[GC_AUTH_PROOF_SIZE];
    gc_status status = receive(fd, challenge, sizeof challenge, deadline, peer, "its challenge");
    if (turned_away) *turned_away = status != GC_OK && !strstr(gc_last_error(), "timed out");
    if (status != GC_OK) return status;
    const char *problem;
    if (!gc_auth_prove(auth, challenge, expected, proof, &problem)) return refused(peer, problem);
    return send_message(fd, proof, sizeof proof, deadline, peer, "the proof");
}

gc_status gc_auth_await_verdict(int fd, double deadline, const char *peer) {
    uint8_t verdict = 1;
    gc_status status = receive(fd, &verdict, 1, deadline, peer, "its verdict");
    if (status != GC_OK && !strstr(gc_last_error(), "timed out"))
        return refused(peer, "it hung up on this process: it does not take our secret (another GC_DIST_SECRET_FILE?)");
    if (status == GC_OK && verdict != 0) return refused(peer, "a verdict that is not this protocol's");
    return status;
}

gc_status gc_auth_connect(int fd, const gc_dist_secret *secret, gc_auth_identity me, gc_auth_identity expected,
                          double deadline, const char *peer, bool *turned_away) {
    gc_auth auth;
    if (turned_away) *turned_away = false;
    gc_status status = gc_auth_send_hello(fd, &auth, secret, me, deadline, peer);
    if (status == GC_OK) status = gc_auth_answer(fd, &auth, expected, deadline, peer, turned_away);
    if (status == GC_OK) status = gc_auth_await_verdict(fd, deadline, peer);
    return status;
}

gc_status gc_auth_send_challenge(int fd, gc_auth *auth, const gc_dist_secret *secret,
                                 const uint8_t hello[GC_AUTH_HELLO_SIZE], gc_auth_identity me,
                                 gc_auth_identity expected, double deadline, const char *peer) {
    uint8_t challenge[GC_AUTH_CHALLENGE_SIZE];
    gc_auth_identity claimed;
    const char *problem;
    if (!gc_auth_challenge(auth, secret, hello, me, &claimed, challenge, &problem)) return refused(peer, problem);
    if (claimed.rank != expected.rank) return refused(peer, "it claims another rank than the one expected");
    return send_message(fd, challenge, sizeof challenge, deadline, peer, "the challenge");
}

gc_status gc_auth_accept_proof(int fd, const gc_auth *auth, const uint8_t proof[GC_AUTH_PROOF_SIZE], double deadline,
                               const char *peer) {
    uint8_t accepted = 0;
    const char *problem;
    if (!gc_auth_verify(auth, proof, &problem)) return refused(peer, problem);
    return send_message(fd, &accepted, 1, deadline, peer, "the verdict");
}

/* --- the log of refusals --- */

#define LOG_WINDOW_SECONDS 10.0
#define LOG_LINES_PER_WINDOW 10

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static double log_window_start = -1e9;
static int log_lines;
static long log_suppressed;

void gc_auth_log_refusal(const char *where, const char *peer, const char *reason) {
    pthread_mutex_lock(&log_lock);
    double now = gc_seconds();
    if (now - log_window_start >= LOG_WINDOW_SECONDS) {
        if (log_suppressed)
            fprintf(stderr, "gradcache: %s: %ld more connections refused (not logged one by one)\n", where,
                    log_suppressed);
        log_window_start = now;
        log_lines = 0;
        log_suppressed = 0;
    }
    if (log_lines < LOG_LINES_PER_WINDOW) {
        fprintf(stderr, "gradcache: %s: refused %s: %s\n", where, peer, reason);
        log_lines++;
    } else {
        log_suppressed++;
    }
    pthread_mutex_unlock(&log_lock);
}
