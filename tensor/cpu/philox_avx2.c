/* Philox batches (philox_cpu.h) with AVX2 (this file is compiled with -mavx2 -mfma and only
 * called after a run-time check: see cpu_isa.c).
 *
 * A register holds two whole blocks, counter words c0 c1 c2 c3 in its 32-bit lanes 0-3 and
 * 4-7, so a round is five instructions for eight words and the result is already in stream
 * order: _mm256_mul_epu32 multiplies lanes 0 and 2 of each half, exactly c0 and c2, by
 * M0 and M1 into 64-bit products (lo0 hi0 lo1 hi1); one shuffle reverses them to
 * (hi1 lo1 hi0 lo0), and xoring (c1 0 c3 0) and the key (k0 0 k1 0) gives the next counter
 * (hi1^c1^k0, lo1, hi0^c3^k1, lo0). Eight registers go through each round together, so
 * that the multiplies' latency is hidden. */
#include <immintrin.h>

#include "../philox_impl.h"
#include "philox_cpu.h"

/* Registers in flight, two blocks each. */
#define LANES 8
#define GROUP_BLOCKS (2 * LANES)

_Static_assert(GC_PHILOX_BATCH % GROUP_BLOCKS == 0, "a batch is whole groups of blocks");

static inline __m256i philox_round(__m256i x, __m256i multipliers, __m256i key) {
    __m256i products = _mm256_mul_epu32(x, multipliers);
    __m256i swapped = _mm256_shuffle_epi32(products, _MM_SHUFFLE(0, 1, 2, 3));
    return _mm256_xor_si256(_mm256_xor_si256(swapped, _mm256_srli_epi64(x, 32)), key);
}

/* The 2 LANES blocks from `first` on (modulo 2^62) into words[0 .. 8 LANES). */
static void philox_group(__m256i key, uint64_t first, uint32_t *words) {
    const __m256i multipliers = _mm256_set_epi64x(GC_PHILOX_M1, GC_PHILOX_M0, GC_PHILOX_M1, GC_PHILOX_M0);
    const __m256i increments = _mm256_set_epi64x(GC_PHILOX_W1, GC_PHILOX_W0, GC_PHILOX_W1, GC_PHILOX_W0);
    const __m256i mask = _mm256_set_epi64x(0, (long long)GC_PHILOX_BLOCK_MASK, 0, (long long)GC_PHILOX_BLOCK_MASK);
    /* 64-bit lanes (block, 0, block + 1, 0): the block's high word lands in c1 */
    __m256i counter = _mm256_set_epi64x(0, (long long)(first + 1), 0, (long long)first), x[LANES];
    for (int i = 0; i < LANES; i++) {
        x[i] = _mm256_and_si256(counter, mask);
        counter = _mm256_add_epi64(counter, _mm256_set_epi64x(0, 2, 0, 2));
    }
    for (int round = 0; round < GC_PHILOX_ROUNDS; round++) {
        for (int i = 0; i < LANES; i++) x[i] = philox_round(x[i], multipliers, key);
        key = _mm256_add_epi32(key, increments);
    }
    for (int i = 0; i < LANES; i++) _mm256_storeu_si256((__m256i *)(words + 8 * i), x[i]);
}

void gc_philox_batch_avx2(uint64_t seed, uint64_t first_block, uint32_t *words) {
    /* 32-bit lanes (k0, 0, k1, 0) twice: the key lined up with the words it is xored into */
    const __m256i key = _mm256_set_epi64x((long long)(seed >> 32), (long long)(uint32_t)seed,
                                          (long long)(seed >> 32), (long long)(uint32_t)seed);
    for (int g = 0; g < GC_PHILOX_BATCH; g += GROUP_BLOCKS) philox_group(key, first_block + (uint64_t)g, words + 4 * g);
}
