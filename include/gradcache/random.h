/* Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11).
 *
 * A stream is named by a 64-bit seed. It is a sequence of 32-bit words:
 *
 *     word(w) = Philox4x32-10(counter = (w / 4 as a 64-bit number in words 0-1, 0, 0),
 *                             key     = (seed low 32 bits, seed high 32 bits))[w % 4]
 *
 * so any word can be computed on its own, on any device, in any order. A random op
 * given (seed, offset) uses the words from `offset` on and reports how many it used:
 *
 *   - uniform: element i = lo + (hi - lo) * u, u = (word(offset + i) >> 8) * 2^-24, in
 *     [0, 1); one word per element;
 *   - normal:  element i = mean + std * z, z from the Box-Muller transform of the two
 *     words offset + 2i and offset + 2i + 1; two words per element.
 *
 * The transforms are computed in f64 with explicit fused multiply-adds and the library's
 * own log and cos (no libm), then rounded once, to nearest even, to the tensor's dtype
 * (the CPU's gc_store and CUDA's __double2half / __double2bfloat16 / __double2float_rn).
 * So the CPU and CUDA give bitwise the same numbers for the same (seed, offset). In a
 * narrow dtype a uniform value may round up to hi itself (f16 rounds 1 - 2^-24 to 1).
 */
#ifndef GRADCACHE_RANDOM_H
#define GRADCACHE_RANDOM_H

#include <stdint.h>

#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The raw block function: 10 rounds (or `rounds`, for the known-answer tests) of
 * Philox4x32 on counter[4] with key[2], written to out[4]. */
void gc_philox4x32(const uint32_t counter[4], const uint32_t key[2], int rounds, uint32_t out[4]);

/* Word w of the stream of `seed` (see above). */
uint32_t gc_philox_word(uint64_t seed, uint64_t w);

/* How many words a uniform / normal draw of n elements consumes. */
uint64_t gc_uniform_words(int64_t n);
uint64_t gc_normal_words(int64_t n);

/* Floating dtypes only; lo <= hi with a finite hi - lo; mean and std finite, std >= 0.
 * Anything else stops the program (a programmer error). */
gc_tensor *gc_uniform(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device,
                      double lo, double hi, uint64_t seed, uint64_t offset);
gc_tensor *gc_normal(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device,
                     double mean, double std, uint64_t seed, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif
