/* dtype sizes and names, the f32 <-> f16 / bf16 conversions (round to nearest even), and an
 * element of any dtype read as a double. */
#include <stdio.h>
#include <string.h>

#include "gradcache/dtype.h"
#include "gradcache/error.h"

size_t gc_dtype_size(gc_dtype dtype) {
    switch (dtype) {
    case GC_F32: return 4;
    case GC_F16: return 2;
    case GC_BF16: return 2;
    case GC_I32: return 4;
    case GC_F64: return 8;
    default: gc_fatal("dtype: unknown dtype %d", (int)dtype);
    }
}

const char *gc_dtype_name(gc_dtype dtype) {
    static const char *const names[GC_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32", "f64"};
    if ((int)dtype < 0 || dtype >= GC_DTYPE_COUNT) gc_fatal("dtype: unknown dtype %d", (int)dtype);
    return names[dtype];
}

const char *gc_dtype_describe(double value, char *text, size_t size) {
    for (int d = 0; d < GC_DTYPE_COUNT; d++)
        if (value == d) {
            snprintf(text, size, "%s", gc_dtype_name((gc_dtype)d));
            return text;
        }
    snprintf(text, size, "an unknown dtype %.17g", value);
    return text;
}

int gc_dtype_is_float(gc_dtype dtype) { return dtype != GC_I32; }

gc_dtype gc_working_dtype(gc_dtype dtype) { return dtype == GC_F16 || dtype == GC_BF16 ? GC_F32 : dtype; }

static uint32_t float_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static float bits_float(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

uint16_t gc_f32_to_bf16(float value) {
    uint32_t bits = float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* nan: keep the sign, force a quiet nan */
        return (uint16_t)((bits >> 16) | 0x0040u);
    /* Round to nearest even on the 16 dropped bits: add 0x7fff plus the lowest kept bit.
     * A carry out of the mantissa correctly bumps the exponent (up to inf). */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

float gc_bf16_to_f32(uint16_t bits) { return bits_float((uint32_t)bits << 16); }

uint16_t gc_f32_to_f16(float value) {
    uint32_t bits = float_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;

    if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* nan -> quiet nan */
    if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */

    int exponent = (int)(magnitude >> 23) - 127; /* unbiased f32 exponent */
    uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u; /* with the implicit 1 */
    if (magnitude < 0x38800000u) { /* below 2^-14: an f16 subnormal (or zero) */
        if (magnitude < 0x33000000u) return sign; /* below 2^-25: rounds to zero */
        /* value = mantissa * 2^(exponent - 23); the f16 subnormal unit is 2^-24 */
        int shift = -exponent - 1; /* 14 .. 24: bits dropped from the 24-bit mantissa */
        uint32_t kept = mantissa >> shift;
        uint32_t rest = mantissa & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rest > half || (rest == half && (kept & 1u))) kept++;
        return (uint16_t)(sign | kept); /* kept may reach 0x400: the smallest normal, right */
    }
    /* normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits */
    uint32_t half_bits = ((uint32_t)(exponent + 15) << 10) | ((magnitude >> 13) & 0x3ffu);
    uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half_bits & 1u))) half_bits++; /* may carry into the exponent */
    return (uint16_t)(sign | half_bits);
}

float gc_f16_to_f32(uint16_t bits) {
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1fu;
    uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13)); /* inf, nan */
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24, exact in f32 */
        float magnitude = (float)mantissa * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

double gc_element_f64(const void *elements, gc_dtype dtype, int64_t i) {
    const char *element = (const char *)elements + (size_t)i * gc_dtype_size(dtype);
    switch (dtype) {
    case GC_F64: { double v; memcpy(&v, element, 8); return v; }
    case GC_F32: { float v; memcpy(&v, element, 4); return v; }
    case GC_I32: { int32_t v; memcpy(&v, element, 4); return v; }
    case GC_F16: { uint16_t v; memcpy(&v, element, 2); return gc_f16_to_f32(v); }
    case GC_BF16: { uint16_t v; memcpy(&v, element, 2); return gc_bf16_to_f32(v); }
    default: break;
    }
    gc_fatal("element_f64: unknown dtype %d", (int)dtype);
}
