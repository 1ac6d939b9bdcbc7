/* SHA-256 as FIPS 180-4 section 6.2 specifies it, and HMAC-SHA256 as RFC 2104 does (see
 * include/gradcache/hash.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gradcache/hash.h"

/* The first 32 bits of the fractional parts of the cube roots of the first 64 primes. */
static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotate_right(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void compress(uint32_t state[8], const unsigned char block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 |
               block[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotate_right(w[i - 15], 7) ^ rotate_right(w[i - 15], 18) ^ w[i - 15] >> 3;
        uint32_t s1 = rotate_right(w[i - 2], 17) ^ rotate_right(w[i - 2], 19) ^ w[i - 2] >> 10;
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6],
             h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25)) + ((e & f) ^ (~e & g)) +
                      round_constants[i] + w[i];
        uint32_t t2 = (rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    uint32_t rounds[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; i++) state[i] += rounds[i];
}

void gc_sha256_init(gc_sha256 *hash) {
    /* the first 32 bits of the fractional parts of the square roots of the first 8 primes */
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(hash->state, initial, sizeof initial);
    hash->length = 0;
}

void gc_sha256_update(gc_sha256 *hash, const void *data, size_t size) {
    const unsigned char *bytes = data;
    for (size_t i = 0; i < size; i++) {
        hash->block[hash->length++ % 64] = bytes[i];
        if (hash->length % 64 == 0) compress(hash->state, hash->block);
    }
}

void gc_sha256_final(gc_sha256 *hash, uint8_t digest[GC_SHA256_SIZE]) {
    uint64_t bits = hash->length * 8;
    /* padding: a 1 bit, zeros up to 56 bytes mod 64, then the length in bits, big-endian */
    unsigned char pad = 0x80;
    gc_sha256_update(hash, &pad, 1);
    pad = 0;
    while (hash->length % 64 != 56) gc_sha256_update(hash, &pad, 1);
    unsigned char length[8];
    for (int i = 0; i < 8; i++) length[i] = (unsigned char)(bits >> (56 - 8 * i));
    gc_sha256_update(hash, length, 8);
    for (int i = 0; i < 32; i++) digest[i] = (uint8_t)(hash->state[i / 4] >> (24 - 8 * (i % 4)));
}

void gc_sha256_hex(gc_sha256 *hash, char hex[65]) {
    uint8_t digest[GC_SHA256_SIZE];
    gc_sha256_final(hash, digest);
    for (int i = 0; i < GC_SHA256_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

gc_status gc_sha256_file(const char *path, char hex[65]) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        gc_set_error(GC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return GC_ERR_IO;
    }
    gc_sha256 hash;
    gc_sha256_init(&hash);
    unsigned char buffer[1 << 16];
    for (size_t got; (got = fread(buffer, 1, sizeof buffer, file)) > 0;) gc_sha256_update(&hash, buffer, got);
    bool failed = ferror(file);
    fclose(file);
    if (failed) {
        gc_set_error(GC_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        return GC_ERR_IO;
    }
    gc_sha256_hex(&hash, hex);
    return GC_OK;
}

void gc_hmac_sha256_init(gc_hmac_sha256 *mac, const void *key, size_t key_size) {
    uint8_t block[GC_SHA256_BLOCK] = {0};
    if (key_size > GC_SHA256_BLOCK) {
        gc_sha256 hashed;
        gc_sha256_init(&hashed);
        gc_sha256_update(&hashed, key, key_size);
        gc_sha256_final(&hashed, block);
    } else if (key_size) {
        memcpy(block, key, key_size);
    }
    uint8_t pad[GC_SHA256_BLOCK];
    for (int i = 0; i < GC_SHA256_BLOCK; i++) pad[i] = block[i] ^ 0x36;
    gc_sha256_init(&mac->inner);
    gc_sha256_update(&mac->inner, pad, sizeof pad);
    for (int i = 0; i < GC_SHA256_BLOCK; i++) pad[i] = block[i] ^ 0x5c;
    gc_sha256_init(&mac->outer);
    gc_sha256_update(&mac->outer, pad, sizeof pad);
}

void gc_hmac_sha256_update(gc_hmac_sha256 *mac, const void *data, size_t size) {
    gc_sha256_update(&mac->inner, data, size);
}

void gc_hmac_sha256_final(gc_hmac_sha256 *mac, uint8_t out[GC_SHA256_SIZE]) {
    uint8_t inner[GC_SHA256_SIZE];
    gc_sha256_final(&mac->inner, inner);
    gc_sha256_update(&mac->outer, inner, sizeof inner);
    gc_sha256_final(&mac->outer, out);
}

bool gc_equal_constant_time(const void *a, const void *b, size_t size) {
    /* volatile: the compiler may not turn the loop into one that stops at the first difference */
    const volatile unsigned char *x = a, *y = b;
    unsigned char difference = 0;
    for (size_t i = 0; i < size; i++) difference |= (unsigned char)(x[i] ^ y[i]);
    return difference == 0;
}
