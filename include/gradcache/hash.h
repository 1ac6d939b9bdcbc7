/* The library's hashes, each streamed (init, update with the bytes in any pieces, then the
 * result), all in base/ (the bottom layer, so that every layer may use them):
 *  - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), the cryptographic one: checking
 *    downloads against known checksums, and the handshake that proves a process of a
 *    distributed run knows the run's secret (dist/auth.c);
 *  - XXH64, a fast non-cryptographic one: the checksum of a safetensors file's data. */
#ifndef GRADCACHE_HASH_H
#define GRADCACHE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GC_SHA256_SIZE 32       /* bytes of a digest (and of an HMAC-SHA256) */
#define GC_SHA256_BLOCK 64      /* bytes of a block */

typedef struct gc_sha256 {
    uint32_t state[8];
    uint64_t length;                       /* bytes hashed so far */
    unsigned char block[GC_SHA256_BLOCK];  /* the partial block */
} gc_sha256;

void gc_sha256_init(gc_sha256 *hash);
void gc_sha256_update(gc_sha256 *hash, const void *data, size_t size);
/* The digest; the state is used up (init it again to hash anew). */
void gc_sha256_final(gc_sha256 *hash, uint8_t digest[GC_SHA256_SIZE]);
/* The digest as 64 lowercase hex digits and a NUL. */
void gc_sha256_hex(gc_sha256 *hash, char hex[65]);
/* The digest of the file at `path`; GC_ERR_IO naming it when it cannot be read. */
gc_status gc_sha256_file(const char *path, char hex[65]);

/* HMAC-SHA256 with a key of any length (a key longer than a block is hashed first). */
typedef struct gc_hmac_sha256 {
    gc_sha256 inner, outer;
} gc_hmac_sha256;

void gc_hmac_sha256_init(gc_hmac_sha256 *mac, const void *key, size_t key_size);
void gc_hmac_sha256_update(gc_hmac_sha256 *mac, const void *data, size_t size);
void gc_hmac_sha256_final(gc_hmac_sha256 *mac, uint8_t out[GC_SHA256_SIZE]);

/* Whether a[0, size) equals b[0, size), in a time that depends on size alone: a MAC compared
 * with memcmp would tell a forger, by how fast it is refused, how many leading bytes are
 * right. */
bool gc_equal_constant_time(const void *a, const void *b, size_t size);

/* XXH64 (seed 0), the 64-bit hash of the xxHash family, as its specification defines it
 * (github.com/Cyan4973/xxHash, doc/xxhash_spec.md): the checksum of a safetensors file's
 * tensor data. Fast (several bytes per cycle, so checking a checkpoint costs little next to
 * reading it), 64 bits wide (a random corruption goes unnoticed with probability 2^-64), and
 * computed by a standard tool (`xxhsum -H64`) for anyone who wants to check a file by hand.
 * Not cryptographic: it catches accidents (bit flips, torn or overwritten blocks), not
 * someone who edits the file on purpose and recomputes it. */
typedef struct gc_xxh64 {
    uint64_t lanes[4];         /* the four accumulators of the 32-byte stripes */
    unsigned char pending[32]; /* bytes of a stripe not yet complete */
    size_t pending_size;
    uint64_t total;            /* bytes seen */
} gc_xxh64;

void gc_xxh64_begin(gc_xxh64 *state);
void gc_xxh64_update(gc_xxh64 *state, const void *bytes, size_t size);
uint64_t gc_xxh64_end(const gc_xxh64 *state);

#ifdef __cplusplus
}
#endif
#endif
