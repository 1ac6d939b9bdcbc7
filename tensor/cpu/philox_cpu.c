/* Philox batches (philox_cpu.h): the portable C variant, the reference for the SIMD ones,
 * and the run-time choice between them. */
#include "philox_cpu.h"
#include "../philox_impl.h"

/* The counter words of the batch's blocks are kept in four arrays, one per word, so that
 * the compiler vectorises each round across blocks; the words are then interleaved into
 * stream order, which costs less than picking them out one by one for the caller. */
void gc_philox_batch_portable(uint64_t seed, uint64_t first_block, uint32_t *words) {
    const uint32_t m0 = GC_PHILOX_M0, m1 = GC_PHILOX_M1, w0 = GC_PHILOX_W0, w1 = GC_PHILOX_W1;
    uint32_t c0[GC_PHILOX_BATCH], c1[GC_PHILOX_BATCH], c2[GC_PHILOX_BATCH], c3[GC_PHILOX_BATCH];
    for (int j = 0; j < GC_PHILOX_BATCH; j++) {
        uint64_t block = (first_block + (uint64_t)j) & GC_PHILOX_BLOCK_MASK;
        c0[j] = (uint32_t)block;
        c1[j] = (uint32_t)(block >> 32);
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
    for (int j = 0; j < GC_PHILOX_BATCH; j++) {
        words[4 * j] = c0[j];
        words[4 * j + 1] = c1[j];
        words[4 * j + 2] = c2[j];
        words[4 * j + 3] = c3[j];
    }
}

gc_philox_batch_fn *gc_philox_batch_for(gc_cpu_isa isa) {
    switch (isa) {
#ifdef GC_HAVE_X86_KERNELS
    /* AVX-512 CPUs run the AVX2 code: a 512-bit variant could not be tested on the machines
     * this was written on */
    case GC_ISA_AVX2:
    case GC_ISA_AVX512: return gc_philox_batch_avx2;
#endif
    default: return gc_philox_batch_portable;
    }
}
