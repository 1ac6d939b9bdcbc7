/* Philox words in bulk for the CPU kernels: the same numbers as gc_philox_read
 * (../philox_impl.h), computed for many blocks at once in arrays, one per counter word, so
 * that the compiler vectorises the rounds across blocks. */
#ifndef GC_TENSOR_PHILOX_CPU_H
#define GC_TENSOR_PHILOX_CPU_H

#include "../philox_impl.h"

/* Blocks computed together: 64 words. */
#define GC_PHILOX_BATCH 16

/* words[j] = word first_word + j of the stream of `seed`, for j < count <= 4 GC_PHILOX_BATCH - 3. */
static inline void gc_philox_words(uint64_t seed, uint64_t first_word, int count, uint32_t *words) {
    const uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
    uint64_t first_block = first_word / 4;
    uint32_t c0[GC_PHILOX_BATCH], c1[GC_PHILOX_BATCH], c2[GC_PHILOX_BATCH], c3[GC_PHILOX_BATCH];
    for (int j = 0; j < GC_PHILOX_BATCH; j++) {
        c0[j] = (uint32_t)(first_block + (uint64_t)j);
        c1[j] = (uint32_t)((first_block + (uint64_t)j) >> 32);
        c2[j] = c3[j] = 0;
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < GC_PHILOX_ROUNDS; round++) {
        for (int j = 0; j < GC_PHILOX_BATCH; j++) {
            uint64_t p0 = (uint64_t)m0 * c0[j], p1 = (uint64_t)m1 * c2[j];
            uint32_t next0 = (uint32_t)(p1 >> 32) ^ c1[j] ^ k0, next2 = (uint32_t)(p0 >> 32) ^ c3[j] ^ k1;
            c1[j] = (uint32_t)p1;
            c3[j] = (uint32_t)p0;
            c0[j] = next0;
            c2[j] = next2;
        }
        k0 += w0;
        k1 += w1;
    }
    int skip = (int)(first_word % 4);
    for (int j = 0; j < count; j++) {
        int w = j + skip, block = w / 4;
        switch (w % 4) {
        case 0: words[j] = c0[block]; break;
        case 1: words[j] = c1[block]; break;
        case 2: words[j] = c2[block]; break;
        default: words[j] = c3[block]; break;
        }
    }
}

#endif
