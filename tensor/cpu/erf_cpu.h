/* erf and the exp of a non-positive number in float, for the f32 GELU (erf form) and its
 * derivative. libm's erff and expf are scalar calls: the GELU loops did not vectorise, and
 * erff alone took a tenth of a CPU training step.
 *
 * Both are written so that GCC vectorises a loop calling them: no branch (each region's
 * formula is computed for every input and the result picked by a select), no call, bits
 * handled through memcpy. Only +, - and * on floats, without FMA (the build is ISO C, where
 * GCC does not contract a * b + c), so every x86-64 CPU gives the same bits. The constants
 * are fitted by tests/make_erf_coefficients.py (erf_coefficients.h). tests/test_erf.c
 * measures the accuracy over every float: erf within 1.08 ulp of the exact value, e^y
 * within 0.99 ulp. */
#ifndef GC_TENSOR_ERF_CPU_H
#define GC_TENSOR_ERF_CPU_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "erf_coefficients.h"

#define GC_F32_SIGN 0x80000000u
/* Adding 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer k (to nearest),
 * and leaves k in the low bits of the sum: bits(sum) = bits(1.5 * 2^23) + k. */
#define GC_ROUND_SHIFTER 0x1.8p23f
#define GC_ROUND_SHIFTER_BITS 0x4B400000u
/* e^y rounds to 0 in float below -104 (e^-104 < 2^-150, half the smallest subnormal);
 * clamping there keeps k >= -150. */
#define GC_EXP_ZERO_BELOW -104.0f

static inline uint32_t gc_f32_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline float gc_f32_from_bits(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* condition ? if_true : if_false, by masking bits. A plain ?: whose arms are computations
 * is a branch to GCC, which does not turn it back into a select (under the default
 * -ftrapping-math it may not compute a float operation that the source skips), and a
 * branch keeps the loop from vectorising. */
static inline float gc_select_f32(bool condition, float if_true, float if_false) {
    uint32_t mask = 0u - (uint32_t)condition;
    return gc_f32_from_bits((gc_f32_bits(if_true) & mask) | (gc_f32_bits(if_false) & ~mask));
}

/* e^y for y <= 0, -inf and nan included. y = k ln2 + r with |r| <= ln2 / 2 (ln2 in two
 * parts, the first short enough that k * GC_LN2_HI is exact), e^r = 1 + r + r^2 E(r), and
 * e^y = e^r 2^(k + 64) 2^-64: 2^(k + 64) is a normal float for every k from -150 to 0,
 * and the last product rounds once where e^y is subnormal. */
static inline float gc_exp_nonpositive_f32(float y) {
    y = gc_select_f32(y < GC_EXP_ZERO_BELOW, GC_EXP_ZERO_BELOW, y); /* a nan stays a nan */
    float shifted = y * GC_LOG2_E + GC_ROUND_SHIFTER;
    float k = shifted - GC_ROUND_SHIFTER;
    float r = (y - k * GC_LN2_HI) - k * GC_LN2_LO;
    float e = GC_EXP_E0 + r * (GC_EXP_E1 + r * (GC_EXP_E2 + r * (GC_EXP_E3 + r * GC_EXP_E4)));
    float exp_r = 1.0f + (r + r * r * e);
    /* unsigned arithmetic: k < 0 wraps, and the sum is k + 127 + 64 */
    uint32_t biased = gc_f32_bits(shifted) - GC_ROUND_SHIFTER_BITS + 127u + 64u;
    return exp_r * gc_f32_from_bits(biased << 23) * 0x1p-64f;
}

/* erf(z) for 0 <= z < GC_ERF_SMALL_MAX: z (1 + Q(z^2)), erf being odd. Written
 * z + z Q(z^2), with 1 + Q(0) = 2 / sqrt(pi), the leading z is exact and the rounding
 * falls on the smaller term. */
static inline float gc_erf_small(float z) {
    float t = z * z;
    float q = GC_ERF_Q0 +
              t * (GC_ERF_Q1 + t * (GC_ERF_Q2 + t * (GC_ERF_Q3 + t * (GC_ERF_Q4 + t * (GC_ERF_Q5 + t * GC_ERF_Q6)))));
    return z + z * q;
}

/* erf(z) for GC_ERF_SMALL_MAX <= z < GC_ERF_ONE_FROM: 1 - erfc(z). erfc falls like
 * e^(-z^2), which no polynomial of low degree follows, so that factor is computed and
 * erfc(z) = e^(-z^2) R(z) with R smooth (about 1 / (z sqrt(pi))). erfc(z) <= 0.22 there,
 * so erf(z) >= 0.78 and its ulp is 2^-24: erfc only needs that much absolute accuracy.
 * R is in powers of z - GC_ERF_SMALL_MAX, small where erfc is largest, so that its
 * evaluation in float errs least there. */
static inline float gc_erf_tail(float z) {
    float s = z - GC_ERF_SMALL_MAX;
    float r = GC_ERFC_R0 +
              s * (GC_ERFC_R1 +
                   s * (GC_ERFC_R2 +
                        s * (GC_ERFC_R3 +
                             s * (GC_ERFC_R4 +
                                  s * (GC_ERFC_R5 + s * (GC_ERFC_R6 + s * (GC_ERFC_R7 + s * GC_ERFC_R8)))))));
    return 1.0f - gc_exp_nonpositive_f32(-(z * z)) * r;
}

/* erf(z): odd, 1 from GC_ERF_ONE_FROM on (where erf rounds to 1), erf(+-inf) = +-1, and a
 * nan stays a nan (it fails both comparisons and takes the tail, which gives nan). */
static inline float gc_erf_f32(float z) {
    uint32_t sign = gc_f32_bits(z) & GC_F32_SIGN;
    float magnitude = gc_f32_from_bits(gc_f32_bits(z) & ~GC_F32_SIGN);
    float erf_magnitude = gc_select_f32(magnitude < GC_ERF_SMALL_MAX, gc_erf_small(magnitude), gc_erf_tail(magnitude));
    erf_magnitude = gc_select_f32(magnitude >= GC_ERF_ONE_FROM, 1.0f, erf_magnitude);
    return gc_f32_from_bits(gc_f32_bits(erf_magnitude) | sign);
}

#endif
