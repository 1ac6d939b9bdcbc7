/* XXH64 (seed 0), the 64-bit hash of the xxHash family, as its specification defines it
 * (github.com/Cyan4973/xxHash, doc/xxhash_spec.md): the checksum of a safetensors file's
 * tensor data. Chosen because it is fast (several bytes per cycle, so checking a checkpoint
 * costs little next to reading it), 64 bits wide (a random corruption goes unnoticed with
 * probability 2^-64), and computed by a standard tool (`xxhsum -H64`) for anyone who wants
 * to check a file by hand. It is not a cryptographic hash: it catches accidents (bit flips,
 * torn or overwritten blocks), not someone who edits the file on purpose and recomputes it.
 *
 * Streaming: begin, update with the bytes in any pieces, end. */
#ifndef GC_NN_CHECKSUM_H
#define GC_NN_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

typedef struct gc_xxh64 {
    uint64_t lanes[4];         /* the four accumulators of the 32-byte stripes */
    unsigned char pending[32]; /* bytes of a stripe not yet complete */
    size_t pending_size;
    uint64_t total;            /* bytes seen */
} gc_xxh64;

void gc_xxh64_begin(gc_xxh64 *state);
void gc_xxh64_update(gc_xxh64 *state, const void *bytes, size_t size);
uint64_t gc_xxh64_end(const gc_xxh64 *state);

#endif
