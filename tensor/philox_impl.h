/* Philox4x32-10 and the uniform and normal transforms of gradcache/random.h, shared by
 * the CPU kernel (cpu/random_cpu.c) and the CUDA kernel (cuda/random_cuda.cu).
 *
 * The two must give bitwise the same numbers for the same (seed, offset). That holds
 * because every floating-point step below is one IEEE 754 defines exactly (correctly
 * rounded +, -, *, /, sqrt and fma, and the conversions), done in double, and nothing
 * is left to the compiler's choice:
 *
 *   - libm's log and cos are not correctly rounded, and glibc's and CUDA's differ in
 *     the last bit now and then, so this file computes its own from the operations
 *     above;
 *   - nvcc contracts a * b + c into one fma by default and gcc in ISO C mode does not,
 *     so every multiply-add is an explicit fma(); the only other products that feed an
 *     addition are exact (scalings by a power of two), where contracting changes
 *     nothing.
 *
 * The kernels round the double result to f32 once; f16 and bf16 are then rounded from
 * that f32 (to nearest even), on both devices, as a cast from f32 does.
 */
#ifndef GC_TENSOR_PHILOX_IMPL_H
#define GC_TENSOR_PHILOX_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "op_params.h"
#include "host_device.h"

#define GC_PHILOX_ROUNDS 10
/* The round multipliers and the key's Weyl increments (docs/philox4x32-10.md),
 * named once for every implementation (this file's, cpu/philox_cpu.c, cpu/philox_avx2.c). */
#define GC_PHILOX_M0 0xD2511F53u
#define GC_PHILOX_M1 0xCD9E8D57u
#define GC_PHILOX_W0 0x9E3779B9u
#define GC_PHILOX_W1 0xBB67AE85u

/* ---------------------------------------------------------------------------------
 * The block function: `rounds` rounds of Philox4x32 on counter[4] with key[2].
 * Each round multiplies two counter words by fixed odd constants and mixes the high
 * halves of the 64-bit products with the other two words and the key; the key moves
 * on by a Weyl sequence between rounds. (Constants and known answers:
 * docs/philox4x32-10.md.) */
static inline GC_HD void gc_philox_block(const uint32_t counter[4], const uint32_t key[2],
                                         int rounds, uint32_t out[4]) {
    const uint32_t m0 = GC_PHILOX_M0, m1 = GC_PHILOX_M1, w0 = GC_PHILOX_W0, w1 = GC_PHILOX_W1;
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < rounds; round++) {
        uint64_t p0 = (uint64_t)m0 * c0, p1 = (uint64_t)m1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0; /* c1 and c3 are read before they are overwritten */
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += w0;
        k1 += w1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Block b of the stream of `seed`, i.e. its words 4b .. 4b+3: the counter is b (low
 * word first, then high word, then two zeros), the key is the seed (low word first). */
static inline GC_HD void gc_philox_stream_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
    const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0u, 0u};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    gc_philox_block(counter, key, GC_PHILOX_ROUNDS, out);
}

/* Reads words of one stream, computing each block once when the words are read in
 * increasing order (the usual case: one block serves four uniforms or two normals). */
typedef struct gc_philox_reader {
    uint64_t seed;
    uint64_t block;    /* the block held in `words`; none before the first read */
    uint32_t words[4];
} gc_philox_reader;

/* Word indices are 64-bit, so blocks are below 2^62 and UINT64_MAX names no block. */
static inline GC_HD gc_philox_reader gc_philox_reader_start(uint64_t seed) {
    gc_philox_reader reader = {seed, UINT64_MAX, {0u, 0u, 0u, 0u}};
    return reader;
}

static inline GC_HD uint32_t gc_philox_read(gc_philox_reader *reader, uint64_t w) {
    if (w / 4 != reader->block) {
        reader->block = w / 4;
        gc_philox_stream_block(reader->seed, reader->block, reader->words);
    }
    return reader->words[w % 4];
}

/* ---------------------------------------------------------------------------------
 * log and cos from +, -, *, / and fma only. Both are accurate to a few units in the
 * last place of a double (tests/test_random.c measures them against libm). */

/* c[0] x^(n-1) + c[1] x^(n-2) + ... + c[n-1], by Horner's rule. */
static inline GC_HD double gc_philox_horner(const double *c, int n, double x) {
    double p = c[0];
    for (int i = 1; i < n; i++) p = fma(p, x, c[i]);
    return p;
}

/* Natural log of a positive normal double x.
 *
 * Write x = m 2^e with m in [sqrt(1/2), sqrt(2)), reading e and m from the bits. Then
 * log x = e log 2 + log m, and log m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with
 * s = (m - 1) / (m + 1), |s| <= 0.1716; stopping after s^21 leaves out less than
 * 2^-60 of log m. log 2 is used as the sum of two doubles (hi + lo, 107 bits) and e
 * times each is added by fma, so e log 2 is as good as exact. */
static inline GC_HD double gc_philox_log(double x) {
    const double ln2_hi = 0x1.62e42fefa39efp-1, ln2_lo = 0x1.abc9e3b39803fp-56;
    const double sqrt2 = 0x1.6a09e667f3bcdp+0;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)(bits >> 52) - 1023;
    uint64_t mantissa_bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m; /* x with its exponent set to 0: in [1, 2) */
    memcpy(&m, &mantissa_bits, sizeof m);
    if (m > sqrt2) { /* fold [sqrt 2, 2) onto [sqrt(1/2), 1), exactly */
        m *= 0.5;
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    /* 2 / (2k + 1) for k = 10 down to 0 */
    const double c[] = {2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
                        2.0 / 9,  2.0 / 7,  2.0 / 5,  2.0 / 3,  2.0};
    double log_m = s * gc_philox_horner(c, 11, s * s);
    return fma((double)e, ln2_hi, fma((double)e, ln2_lo, log_m));
}

/* sin x and cos x for 0 <= x <= pi/4 by their Taylor series through x^19 and x^18: the
 * first term left out is below 2^-60 of the result there. */
static inline GC_HD double gc_philox_sin_small(double x) {
    /* (-1)^k / (2k + 1)! for k = 9 down to 0 */
    const double c[] = {-1.0 / 121645100408832000.0, 1.0 / 355687428096000.0,
                        -1.0 / 1307674368000.0,      1.0 / 6227020800.0,
                        -1.0 / 39916800.0,           1.0 / 362880.0,
                        -1.0 / 5040.0,               1.0 / 120.0,
                        -1.0 / 6.0,                  1.0};
    return x * gc_philox_horner(c, 10, x * x);
}

static inline GC_HD double gc_philox_cos_small(double x) {
    /* (-1)^k / (2k)! for k = 9 down to 0 */
    const double c[] = {-1.0 / 6402373705728000.0, 1.0 / 20922789888000.0,
                        -1.0 / 87178291200.0,      1.0 / 479001600.0,
                        -1.0 / 3628800.0,          1.0 / 40320.0,
                        -1.0 / 720.0,              1.0 / 24.0,
                        -1.0 / 2.0,                1.0};
    return gc_philox_horner(c, 10, x * x);
}

/* cos(2 pi u) for u in [0, 1).
 *
 * The argument is reduced in u, where it is exact: t = 4u (a power-of-two scale) splits
 * into the quadrant q = floor(t) and f = t - q in [0, 1), and
 * cos(2 pi u) = cos(q pi/2 + theta) with theta = f pi/2. The series above are then
 * evaluated at x = theta, or, for f > 1/2, at x = (1 - f) pi/2 = pi/2 - theta (1 - f is
 * exact too): either way x is in [0, pi/4], where they converge fast. No multiple of pi
 * is ever subtracted in floating point, which is where a library cosine of 2 pi u would
 * lose digits near the zeros.
 *
 *     q:                    0            1             2             3
 *     cos(q pi/2 + theta):  cos theta    -sin theta    -cos theta    sin theta
 * with cos theta = cos x and sin theta = sin x, or, folded, cos theta = sin x and
 * sin theta = cos x. */
static inline GC_HD double gc_philox_cos_2pi(double u) {
    const double pi_2 = 0x1.921fb54442d18p+0;
    double t = u * 4.0;
    int quadrant = (int)t;
    double f = t - quadrant;
    bool folded = f > 0.5;
    double x = (folded ? 1.0 - f : f) * pi_2;
    bool use_sin = (quadrant % 2 == 1) != folded;
    double magnitude = use_sin ? gc_philox_sin_small(x) : gc_philox_cos_small(x);
    return quadrant == 1 || quadrant == 2 ? -magnitude : magnitude;
}

/* ---------------------------------------------------------------------------------
 * The transforms (gradcache/random.h). */

/* The top 24 bits of a word as a double in [0, 1): k 2^-24, exact. */
static inline GC_HD double gc_philox_unit(uint32_t word) { return (double)(word >> 8) * 0x1p-24; }

/* Element i of a draw that starts at word `offset`, in double:
 *   uniform (a = lo, b = hi): lo + (hi - lo) u, u from word offset + i;
 *   normal (a = mean, b = std): mean + std z, z = sqrt(-2 log u1) cos(2 pi u2) (Box-Muller)
 *     with u1 = 1 - unit(word offset + 2i), in (0, 1] so that log never sees 0, and
 *     u2 = unit(word offset + 2i + 1). |z| <= sqrt(-2 log 2^-24) ~ 5.77.
 * Word indices wrap around modulo 2^64, the same on every device. */
static inline GC_HD double gc_philox_sample(gc_philox_reader *reader, gc_random_kind kind,
                                            uint64_t offset, uint64_t i, double a, double b) {
    if (kind == GC_RANDOM_UNIFORM) {
        double u = gc_philox_unit(gc_philox_read(reader, offset + i));
        return fma(b - a, u, a);
    }
    double u1 = 1.0 - gc_philox_unit(gc_philox_read(reader, offset + 2 * i));
    double u2 = gc_philox_unit(gc_philox_read(reader, offset + 2 * i + 1));
    double z = sqrt(-2.0 * gc_philox_log(u1)) * gc_philox_cos_2pi(u2);
    return fma(b, z, a);
}

#endif
