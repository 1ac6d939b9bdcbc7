/* Philox words in bulk for the CPU kernels: the same numbers as gc_philox_read
 * (../philox_impl.h), a batch of whole blocks at a time, in stream order, by portable C or
 * by SIMD code picked at run time (cpu_isa.h). Every variant gives the same words. */
#ifndef GC_TENSOR_PHILOX_CPU_H
#define GC_TENSOR_PHILOX_CPU_H

#include <stdint.h>

#include "cpu_isa.h"

/* Blocks per batch: enough that a call's fixed costs (the key schedule, the caller's loop
 * setup) are spread over many words, few enough that the words stay in L1. */
#define GC_PHILOX_BATCH 64
#define GC_PHILOX_BATCH_WORDS (4 * GC_PHILOX_BATCH)

/* Word indices wrap modulo 2^64 (philox_impl.h), so blocks wrap modulo 2^62. */
#define GC_PHILOX_BLOCK_MASK ((UINT64_C(1) << 62) - 1)

/* words[4 j + r] = word r of block (first_block + j) mod 2^62 of the stream of `seed`,
 * for j < GC_PHILOX_BATCH: the words 4 first_block .. 4 first_block + 4 GC_PHILOX_BATCH - 1. */
typedef void gc_philox_batch_fn(uint64_t seed, uint64_t first_block, uint32_t *words);

/* The variant for `isa` (which must be available). */
gc_philox_batch_fn *gc_philox_batch_for(gc_cpu_isa isa);

gc_philox_batch_fn gc_philox_batch_portable;
#ifdef GC_HAVE_X86_KERNELS
gc_philox_batch_fn gc_philox_batch_avx2;
#endif

#endif
