/* The handshake that opens every connection of a run, the store's and the ring's: both sides
 * prove that they know the run's secret, without sending it, and the client says who it is.
 * Private to dist/.
 *
 *   client -> server  hello:     magic "GCAUTH1\0", purpose (u32), rank (u32), client nonce (32)
 *   server -> client  challenge: magic, purpose, rank, server nonce (32),
 *                                HMAC(secret, "server" || hello || the challenge's first 48 bytes)
 *   client -> server  proof:     HMAC(secret, "client" || hello || the challenge's first 48 bytes)
 *   server -> client  verdict:   one byte 0 (a refused client is disconnected instead)
 *
 * Integers are little-endian; the nonces come from getrandom. Each MAC covers both nonces and
 * both identities, so a MAC seen once is of no use again (replay) or the other way round
 * (the labels differ: reflection), and a client that claims another rank or purpose, or a
 * server that is not the one expected, fails. MACs are compared in constant time. The
 * messages are built and checked by pure functions (fuzzed: tests/fuzz/fuzz_auth.c); the
 * blocking steps below move them over a socket with a deadline. */
#ifndef GC_DIST_AUTH_H
#define GC_DIST_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/dist.h"
#include "gradcache/hash.h"

#define GC_AUTH_NONCE_SIZE 32
#define GC_AUTH_HELLO_SIZE (8 + 4 + 4 + GC_AUTH_NONCE_SIZE)
#define GC_AUTH_CHALLENGE_SIZE (GC_AUTH_HELLO_SIZE + GC_SHA256_SIZE)
#define GC_AUTH_PROOF_SIZE GC_SHA256_SIZE

enum { GC_AUTH_STORE = 1, GC_AUTH_RING = 2 }; /* what a connection is for */

typedef struct gc_auth_identity {
    uint32_t purpose; /* GC_AUTH_STORE or GC_AUTH_RING */
    uint32_t rank;
} gc_auth_identity;

/* One side's state across a handshake: the transcript the MACs cover. */
typedef struct gc_auth {
    const gc_dist_secret *secret;
    uint8_t hello[GC_AUTH_HELLO_SIZE];     /* the client's */
    uint8_t challenge[GC_AUTH_HELLO_SIZE]; /* the server's, without its MAC */
} gc_auth;

/* --- the messages (no I/O) --- */

/* The client's hello, with a fresh nonce. False (with *problem) only when the system has no
 * random bytes. */
bool gc_auth_hello(gc_auth *auth, const gc_dist_secret *secret, gc_auth_identity me, uint8_t out[GC_AUTH_HELLO_SIZE],
                   const char **problem);
/* Whether the first `size` bytes received could start a hello (the magic so far): the server
 * drops a client that is not speaking this protocol without waiting for a whole hello. */
bool gc_auth_hello_plausible(const uint8_t *data, size_t size);
/* The server's answer to a hello: *claimed is who the client says it is, out the challenge.
 * False (with *problem) when the hello is not one or claims another purpose than mine. */
bool gc_auth_challenge(gc_auth *auth, const gc_dist_secret *secret, const uint8_t hello[GC_AUTH_HELLO_SIZE],
                       gc_auth_identity me, gc_auth_identity *claimed, uint8_t out[GC_AUTH_CHALLENGE_SIZE],
                       const char **problem);
/* The client's proof, once the challenge shows the server knows the secret and is `expected`.
 * False (with *problem) otherwise. */
bool gc_auth_prove(gc_auth *auth, const uint8_t challenge[GC_AUTH_CHALLENGE_SIZE], gc_auth_identity expected,
                   uint8_t out[GC_AUTH_PROOF_SIZE], const char **problem);
/* The server's check of the client's proof. False (with *problem) when it is wrong. */
bool gc_auth_verify(const gc_auth *auth, const uint8_t proof[GC_AUTH_PROOF_SIZE], const char **problem);

/* --- the steps over a connected socket, each before the deadline; on failure GC_ERR_PEER
 * with a message naming `peer` and the reason --- */

/* Client: sends the hello. */
gc_status gc_auth_send_hello(int fd, gc_auth *auth, const gc_dist_secret *secret, gc_auth_identity me, double deadline,
                             const char *peer);
/* Client: reads the challenge, checks it (the server must be `expected`), sends the proof.
 * When turned_away is not NULL, it tells whether the server hung up before its challenge (it
 * had no place for this connection: worth trying again). */
gc_status gc_auth_answer(int fd, gc_auth *auth, gc_auth_identity expected, double deadline, const char *peer,
                         bool *turned_away);
/* Client: reads the verdict (the server hangs up on a client it refuses). */
gc_status gc_auth_await_verdict(int fd, double deadline, const char *peer);
/* Client: the three steps above in a row (turned_away as for gc_auth_answer). */
gc_status gc_auth_connect(int fd, const gc_dist_secret *secret, gc_auth_identity me, gc_auth_identity expected,
                          double deadline, const char *peer, bool *turned_away);
/* Server: answers the hello the caller has read (it must claim `expected`) with the challenge. */
gc_status gc_auth_send_challenge(int fd, gc_auth *auth, const gc_dist_secret *secret,
                                 const uint8_t hello[GC_AUTH_HELLO_SIZE], gc_auth_identity me,
                                 gc_auth_identity expected, double deadline, const char *peer);
/* Server: checks the proof the caller has read, sends the verdict. */
gc_status gc_auth_accept_proof(int fd, const gc_auth *auth, const uint8_t proof[GC_AUTH_PROOF_SIZE], double deadline,
                               const char *peer);

/* One line on stderr, "gradcache: <where>: refused <peer>: <reason>", at most 10 in any 10 s
 * (then one line says how many more were refused): an outsider must not fill a log. */
void gc_auth_log_refusal(const char *where, const char *peer, const char *reason);

#endif
