/* libFuzzer target for the handshake (dist/auth.c), the first bytes any process that
 * connects to a store or a ring listener sends, and the first bytes a process reads from
 * what it connected to. The input is, in turn:
 *   - a hello a server gets (its first GC_AUTH_HELLO_SIZE bytes, zero-padded), then a proof:
 *     the proof must never be accepted (it would take forging an HMAC of a fresh nonce);
 *   - a challenge a client gets: never accepted either (the server's MAC cannot be forged);
 *   - two identities and a secret made of its bytes: an honest handshake between them must
 *     succeed when the identities are what each side expects and fail when they are not, and
 *     fail when the client holds a secret one byte different;
 * and whether any prefix of it could start a hello must agree with the magic. Nothing may
 * read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data[at, at + size) into out, zero-padded past the input's end. */
static void take(const uint8_t *data, size_t size, size_t at, uint8_t *out, size_t out_size) {
    memset(out, 0, out_size);
    if (at < size) memcpy(out, data + at, size - at < out_size ? size - at : out_size);
}

static void strangers(const uint8_t *data, size_t size, const gc_dist_secret *secret) {
    gc_auth server, client;
    uint8_t hello[GC_AUTH_HELLO_SIZE], challenge[GC_AUTH_CHALLENGE_SIZE], proof[GC_AUTH_PROOF_SIZE];
    gc_auth_identity me = {GC_AUTH_STORE, 0}, claimed;
    const char *problem = NULL;
    take(data, size, 0, hello, sizeof hello);
    if (gc_auth_challenge(&server, secret, hello, me, &claimed, challenge, &problem)) {
        if (claimed.purpose != me.purpose) abort();
        take(data, size, sizeof hello, proof, sizeof proof);
        if (gc_auth_verify(&server, proof, &problem)) abort();
    }
    if (!problem || !*problem) abort();
    problem = NULL;
    if (!gc_auth_hello(&client, secret, (gc_auth_identity){GC_AUTH_STORE, 1}, hello, &problem)) abort();
    take(data, size, 0, challenge, sizeof challenge);
    if (gc_auth_prove(&client, challenge, me, proof, &problem) || !problem) abort();
}

static void honest(const uint8_t *data, size_t size, const gc_dist_secret *secret) {
    uint8_t bytes[8];
    take(data, size, 0, bytes, sizeof bytes);
    gc_auth_identity client_id = {1 + bytes[0] % 2, bytes[1]}, server_id = {1 + bytes[2] % 2, bytes[3]};
    gc_auth_identity expected = {1 + bytes[4] % 2, bytes[5]}; /* whom the client expects to reach */
    gc_dist_secret other = *secret;
    other.bytes[bytes[6] % other.size] ^= (uint8_t)(1 | bytes[7]);
    for (int liar = 0; liar < 2; liar++) { /* liar: the client holds the other secret */
        gc_auth client, server;
        uint8_t hello[GC_AUTH_HELLO_SIZE], challenge[GC_AUTH_CHALLENGE_SIZE], proof[GC_AUTH_PROOF_SIZE];
        gc_auth_identity claimed;
        const char *problem;
        if (!gc_auth_hello(&client, liar ? &other : secret, client_id, hello, &problem)) abort();
        bool heard = gc_auth_challenge(&server, secret, hello, server_id, &claimed, challenge, &problem);
        if (heard != (client_id.purpose == server_id.purpose)) abort();
        if (!heard) continue;
        if (claimed.purpose != client_id.purpose || claimed.rank != client_id.rank) abort();
        bool proved = gc_auth_prove(&client, challenge, expected, proof, &problem);
        bool right = !liar && expected.purpose == server_id.purpose && expected.rank == server_id.rank;
        if (proved != right) abort();
        if (proved && !gc_auth_verify(&server, proof, &problem)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_dist_secret secret = {.size = GC_DIST_SECRET_MIN + (size ? data[0] : 0)};
    take(data, size, 1, secret.bytes, secret.size);
    strangers(data, size, &secret);
    honest(data + (size > 9 ? 9 : size), size > 9 ? size - 9 : 0, &secret);
    bool plausible = true;
    for (size_t n = 0; n <= size && n <= 8; n++) {
        bool now = gc_auth_hello_plausible(data, n);
        if (now && !plausible) abort(); /* a prefix refused, a longer one taken */
        plausible = now;
    }
    return 0;
}
