/* XXH64 with seed 0 (see include/gradcache/hash.h), written from the specification. */
#include <string.h>

#include "gradcache/hash.h"

static const uint64_t PRIME1 = 0x9E3779B185EBCA87u, PRIME2 = 0xC2B2AE3D27D4EB4Fu, PRIME3 = 0x165667B19E3779F9u,
                      PRIME4 = 0x85EBCA77C2B2AE63u, PRIME5 = 0x27D4EB2F165667C5u;

static uint64_t rotate_left(uint64_t x, int bits) { return x << bits | x >> (64 - bits); }

/* Little-endian reads, whatever the host's order; memcpy compiles to one load. */
static uint64_t read64(const unsigned char *p) {
    uint64_t value;
    memcpy(&value, p, sizeof value);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    value = __builtin_bswap64(value);
#endif
    return value;
}

static uint64_t read32(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

/* One 8-byte lane mixed into an accumulator. */
static uint64_t mix_lane(uint64_t accumulator, uint64_t lane) {
    return rotate_left(accumulator + lane * PRIME2, 31) * PRIME1;
}

/* `count` 32-byte stripes at p mixed into the four accumulators, held in locals: through the
 * state, each store could alias the input bytes and the compiler would reload everything. */
static void consume_stripes(gc_xxh64 *state, const unsigned char *p, size_t count) {
    uint64_t v0 = state->lanes[0], v1 = state->lanes[1], v2 = state->lanes[2], v3 = state->lanes[3];
    for (; count > 0; count--, p += 32) {
        v0 = mix_lane(v0, read64(p));
        v1 = mix_lane(v1, read64(p + 8));
        v2 = mix_lane(v2, read64(p + 16));
        v3 = mix_lane(v3, read64(p + 24));
    }
    state->lanes[0] = v0, state->lanes[1] = v1, state->lanes[2] = v2, state->lanes[3] = v3;
}

void gc_xxh64_begin(gc_xxh64 *state) {
    *state = (gc_xxh64){.lanes = {PRIME1 + PRIME2, PRIME2, 0, 0 - PRIME1}};
}

void gc_xxh64_update(gc_xxh64 *state, const void *bytes, size_t size) {
    const unsigned char *p = bytes;
    state->total += size;
    if (state->pending_size > 0) { /* complete the stripe an earlier piece began */
        size_t take = sizeof state->pending - state->pending_size;
        if (take > size) take = size;
        memcpy(state->pending + state->pending_size, p, take);
        state->pending_size += take;
        p += take;
        size -= take;
        if (state->pending_size < sizeof state->pending) return;
        consume_stripes(state, state->pending, 1);
        state->pending_size = 0;
    }
    consume_stripes(state, p, size / 32);
    p += size / 32 * 32;
    size %= 32;
    memcpy(state->pending, p, size);
    state->pending_size = size;
}

uint64_t gc_xxh64_end(const gc_xxh64 *state) {
    uint64_t hash;
    if (state->total >= 32) {
        const uint64_t *v = state->lanes;
        hash = rotate_left(v[0], 1) + rotate_left(v[1], 7) + rotate_left(v[2], 12) + rotate_left(v[3], 18);
        for (int i = 0; i < 4; i++) hash = (hash ^ mix_lane(0, v[i])) * PRIME1 + PRIME4;
    } else {
        hash = PRIME5; /* the seed, 0, plus PRIME5 */
    }
    hash += state->total;
    /* the last bytes (fewer than a stripe): by 8, then 4, then 1 */
    const unsigned char *p = state->pending;
    size_t left = state->pending_size;
    for (; left >= 8; p += 8, left -= 8) hash = rotate_left(hash ^ mix_lane(0, read64(p)), 27) * PRIME1 + PRIME4;
    if (left >= 4) {
        hash = rotate_left(hash ^ read32(p) * PRIME1, 23) * PRIME2 + PRIME3;
        p += 4;
        left -= 4;
    }
    for (; left > 0; p++, left--) hash = rotate_left(hash ^ *p * PRIME5, 11) * PRIME1;
    /* the avalanche: every input bit reaches every output bit */
    hash = (hash ^ hash >> 33) * PRIME2;
    hash = (hash ^ hash >> 29) * PRIME3;
    return hash ^ hash >> 32;
}
