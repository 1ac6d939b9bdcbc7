/* The f32 <-> f16 / bf16 conversions (round to nearest, ties to even; inf, nan and
 * subnormals kept) against known bit patterns, a check that every rounding is to the
 * nearest value over a sweep of f32 patterns, the round trips of all 16-bit patterns,
 * and the CPU cast kernel between every pair of dtypes. */
#include <float.h>

#include "check.h"
#include "tensor/cpu/kernels_cpu.h"

static uint32_t f32_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static float bits_f32(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void test_f16_known(void) {
    static const struct {
        float value;
        uint16_t bits;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},                 /* the largest f16 */
        {65520.0f, 0x7c00},                 /* halfway to 2^16: ties to even, which is inf */
        {0x1.ffdffep+15f, 0x7bff},          /* 65519.996, just below: 65504 */
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001},                 /* the smallest subnormal */
        {0x1p-25f, 0x0000},                 /* half of it: ties to even, 0 */
        {-0x1p-25f, 0x8000},                /* ... keeping the sign */
        {0x3p-26f, 0x0001},                 /* 3/4 of it: up */
        {0x3p-25f, 0x0002},                 /* 1.5 units: ties to even, 2 */
        {0x1.ff8p-15f, 0x03ff},             /* 1023 units: the largest subnormal */
        {0x1.ffcp-15f, 0x0400},             /* 1023.5 units: ties to even, the smallest normal */
        {0x1p-14f, 0x0400},                 /* the smallest normal */
        {0x1p-149f, 0x0000},                /* an f32 subnormal */
        {1.0f + 0x1p-11f, 0x3c00},          /* halfway between 1 and 1 + 2^-10: even, 1 */
        {1.0f + 0x3p-11f, 0x3c02},          /* halfway between 1 + 2^-10 and 1 + 2^-9: even, up */
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, /* just above halfway: up */
        {0.1f, 0x2e66},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(gc_f32_to_f16(cases[i].value) == cases[i].bits, "%a: got 0x%04x, want 0x%04x",
                  (double)cases[i].value, gc_f32_to_f16(cases[i].value), cases[i].bits);

    /* nan stays a quiet nan with its sign */
    uint16_t nan = gc_f32_to_f16(NAN), negative_nan = gc_f32_to_f16(-NAN);
    uint16_t signaling = gc_f32_to_f16(bits_f32(0x7f800001u));
    CHECK((nan & 0x7c00) == 0x7c00 && (nan & 0x0200) && !(nan & 0x8000));
    CHECK((negative_nan & 0x7e00) == 0x7e00 && (negative_nan & 0x8000));
    CHECK((signaling & 0x7e00) == 0x7e00);

    CHECK(gc_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(gc_f16_to_f32(0x03ff) == 0x1.ff8p-15f);
    CHECK(gc_f16_to_f32(0x0400) == 0x1p-14f);
    CHECK(gc_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(gc_f16_to_f32(0x3555) == 0x1.554p-2f);
    CHECK(gc_f16_to_f32(0x7c00) == INFINITY && gc_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(isnan(gc_f16_to_f32(0x7e00)) && isnan(gc_f16_to_f32(0x7c01)));
    CHECK(f32_bits(gc_f16_to_f32(0x8000)) == 0x80000000u); /* -0 */
    CHECK(f32_bits(gc_f16_to_f32(0x8001)) == f32_bits(-0x1p-24f));
}

static void test_bf16_known(void) {
    static const struct {
        uint32_t value;
        uint16_t bits;
    } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0xc0000000u, 0xc000}, /* -2 */
        {0x80000000u, 0x8000}, /* -0 */
        {0x3f808000u, 0x3f80}, /* halfway, the kept bit even: down */
        {0x3f818000u, 0x3f82}, /* halfway, the kept bit odd: up */
        {0x3f808001u, 0x3f81}, /* just above halfway: up */
        {0x3f807fffu, 0x3f80}, /* just below: down */
        {0x7f7f7fffu, 0x7f7f}, /* just below halfway to inf: the largest bf16 */
        {0x7f7f8000u, 0x7f80}, /* halfway from the largest bf16 to 2^128: even, inf */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX: inf */
        {0xff7fffffu, 0xff80}, /* -FLT_MAX: -inf */
        {0x7f800000u, 0x7f80}, /* inf */
        {0xff800000u, 0xff80}, /* -inf */
        {0x00010000u, 0x0001}, /* f32 subnormals are kept */
        {0x00008000u, 0x0000}, /* halfway to the smallest: even, 0 */
        {0x00018000u, 0x0002}, /* halfway, odd: up */
        {0x80010000u, 0x8001},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = gc_f32_to_bf16(bits_f32(cases[i].value));
        CHECK_MSG(got == cases[i].bits, "0x%08x: got 0x%04x, want 0x%04x", cases[i].value, got,
                  cases[i].bits);
    }
    uint16_t nan = gc_f32_to_bf16(NAN), negative_nan = gc_f32_to_bf16(-NAN);
    uint16_t signaling = gc_f32_to_bf16(bits_f32(0x7f800001u)); /* its payload is all dropped */
    CHECK((nan & 0x7fc0) == 0x7fc0 && !(nan & 0x8000));
    CHECK((negative_nan & 0xffc0) == 0xffc0);
    CHECK((signaling & 0x7fc0) == 0x7fc0);
    CHECK(f32_bits(gc_bf16_to_f32(0x3f80)) == 0x3f800000u);
    CHECK(f32_bits(gc_bf16_to_f32(0x0001)) == 0x00010000u);
    CHECK(gc_bf16_to_f32(0xff80) == -INFINITY);
}

/* |x - y| in double, exact for the f32 values compared here */
static double distance(float x, float y) { return fabs((double)x - (double)y); }

/* `to` and `from` are a narrowing conversion and its exact widening; `top` is the
 * largest finite pattern and `overflow` the f32 from which values round to inf (ties
 * to even: the top pattern is odd). For a positive finite f32 x: below `overflow` the
 * result h is finite and no neighbour pattern is nearer to x, and at a tie h is even;
 * from `overflow` on, the result is inf. And -x converts to the same pattern with the
 * sign bit set. */
static int nearest_even_failures(uint16_t (*to)(float), float (*from)(uint16_t), uint16_t top,
                                 float overflow, uint32_t pattern) {
    float x = bits_f32(pattern);
    uint16_t h = to(x);
    if ((uint16_t)(h | 0x8000) != to(-x)) return 1;
    if (x >= overflow) return h != (uint16_t)(top + 1);
    if (h > top) return 1;
    double d = distance(x, from(h));
    /* the pattern above the top is the value 2^16 (f16) or 2^128 (bf16) */
    double above = h < top ? distance(x, from((uint16_t)(h + 1)))
                           : (double)overflow * 2 - (double)from(top) - x;
    double below = h > 0 ? distance(x, from((uint16_t)(h - 1))) : INFINITY;
    if (d > above || d > below) return 1;
    return (d == above || d == below) && (h & 1);
}

/* Every 127th positive f32 pattern (an odd stride, so all low-bit patterns and ties
 * occur: about 16.9 million values over the whole range). */
static void test_nearest_even_sweep(void) {
    int f16_bad = 0, bf16_bad = 0;
    for (uint32_t pattern = 0; pattern < 0x7f800000u; pattern += 127) {
        f16_bad += nearest_even_failures(gc_f32_to_f16, gc_f16_to_f32, 0x7bff, 65520.0f, pattern);
        bf16_bad += nearest_even_failures(gc_f32_to_bf16, gc_bf16_to_f32, 0x7f7f,
                                          bits_f32(0x7f7f8000u), pattern);
    }
    CHECK_MSG(f16_bad == 0, "f16: %d f32 patterns not rounded to nearest even", f16_bad);
    CHECK_MSG(bf16_bad == 0, "bf16: %d f32 patterns not rounded to nearest even", bf16_bad);
}

/* Whether pattern h fails to widen to f32 and narrow back to itself (a nan, whose
 * payload may change, to some nan); `exponent` and `mantissa` mask the pattern's fields. */
static bool round_trip_fails(uint16_t (*to)(float), float (*from)(uint16_t), uint16_t exponent,
                             uint16_t mantissa, uint16_t h) {
    float wide = from(h);
    bool nan = (h & exponent) == exponent && (h & mantissa);
    if (nan) return !(isnan(wide) && isnan(from(to(wide))));
    return to(wide) != h;
}

/* Every 16-bit pattern round-trips. */
static void test_round_trips(void) {
    int f16_bad = 0, bf16_bad = 0;
    for (uint32_t bits = 0; bits <= 0xffff; bits++) {
        f16_bad += round_trip_fails(gc_f32_to_f16, gc_f16_to_f32, 0x7c00, 0x03ff, (uint16_t)bits);
        bf16_bad +=
            round_trip_fails(gc_f32_to_bf16, gc_bf16_to_f32, 0x7f80, 0x007f, (uint16_t)bits);
    }
    CHECK_MSG(f16_bad == 0, "f16: %d patterns do not round-trip", f16_bad);
    CHECK_MSG(bf16_bad == 0, "bf16: %d patterns do not round-trip", bf16_bad);
}

/* gc_cpu_cast of n elements from `src` (of dtype `from`) gives exactly the bytes `want`
 * (of dtype `to`). */
static void expect_cast(gc_dtype from, const void *src, gc_dtype to, const void *want, size_t n) {
    unsigned char got[64];
    REQUIRE(n * gc_dtype_size(to) <= sizeof got);
    gc_cpu_cast(src, from, got, to, n);
    CHECK_MSG(memcmp(got, want, n * gc_dtype_size(to)) == 0, "cast %s -> %s of %zu elements",
              gc_dtype_name(from), gc_dtype_name(to), n);
}

static void test_cpu_cast(void) {
    /* f32 -> f16 rounds once, from the f32 value: 1 + 2^-11 + 2^-23 goes up, which it
     * would not if anything narrower came in between */
    const float f32_in[] = {1.0f + 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-23f, 0x1.ffdffep+15f,
                            65520.0f,        -0x1p-25f,                  0x3p-26f};
    const uint16_t f16_want[] = {0x3c00, 0x3c01, 0x7bff, 0x7c00, 0x8000, 0x0001};
    expect_cast(GC_F32, f32_in, GC_F16, f16_want, 6);

    const uint16_t f16_in[] = {0x0001, 0x7bff, 0xfc00, 0x8000};
    const float f32_from_f16[] = {0x1p-24f, 65504.0f, -INFINITY, -0.0f};
    expect_cast(GC_F16, f16_in, GC_F32, f32_from_f16, 4);

    const float bf16_ties[] = {bits_f32(0x3f808000u), bits_f32(0x3f818000u), bits_f32(0x7f7fffffu)};
    const uint16_t bf16_want[] = {0x3f80, 0x3f82, 0x7f80};
    expect_cast(GC_F32, bf16_ties, GC_BF16, bf16_want, 3);

    /* bf16 -> f16: exact, into the subnormals, and past the f16 range to inf */
    const uint16_t bf16_in[] = {0x3f80, 0x3580 /* 2^-20 */, 0x47c3 /* 99840 */, 0xbfc0 /* -1.5 */};
    const uint16_t f16_from_bf16[] = {0x3c00, 0x0010, 0x7c00, 0xbe00};
    expect_cast(GC_BF16, bf16_in, GC_F16, f16_from_bf16, 4);

    /* f16 -> bf16: 1 + 2^-10 needs 10 mantissa bits, bf16 has 7: down to 1 */
    const uint16_t f16_fine[] = {0x3c01, 0x7bff};
    const uint16_t bf16_from_f16[] = {0x3f80, 0x4780 /* 65504 -> 65536 */};
    expect_cast(GC_F16, f16_fine, GC_BF16, bf16_from_f16, 2);

    /* float -> i32 truncates toward zero, as in C */
    const float to_int[] = {-2.7f, 2.7f, -0.5f, 1e9f};
    const int32_t ints[] = {-2, 2, 0, 1000000000};
    expect_cast(GC_F32, to_int, GC_I32, ints, 4);
    const double to_int64[] = {-7.9, 123456789.5};
    const int32_t ints64[] = {-7, 123456789};
    expect_cast(GC_F64, to_int64, GC_I32, ints64, 2);

    /* i32 -> floats round to nearest even */
    const int32_t int_in[] = {16777217, -3, 0, 2049};
    const float f32_from_int[] = {16777216.0f, -3.0f, 0.0f, 2049.0f};
    expect_cast(GC_I32, int_in, GC_F32, f32_from_int, 4);
    const int32_t to_half[] = {65519, 2049, 2051, -70000};
    const uint16_t f16_from_int[] = {0x7bff, 0x6800 /* 2048 */, 0x6802 /* 2052 */, 0xfc00};
    expect_cast(GC_I32, to_half, GC_F16, f16_from_int, 4);
    const double f64_from_int[] = {16777217.0, -3.0, 0.0, 2049.0};
    expect_cast(GC_I32, int_in, GC_F64, f64_from_int, 4);

    /* f64 <-> f32 */
    const double f64_in[] = {0.1, 1e300, -1e-50};
    const float f32_from_f64[] = {0.1f, INFINITY, -0.0f};
    expect_cast(GC_F64, f64_in, GC_F32, f32_from_f64, 3);
    const float f32_exact[] = {0.1f, FLT_MAX, 0x1p-149f};
    const double f64_from_f32[] = {(double)0.1f, (double)FLT_MAX, 0x1p-149};
    expect_cast(GC_F32, f32_exact, GC_F64, f64_from_f32, 3);

    /* same dtype: a copy */
    expect_cast(GC_F16, f16_in, GC_F16, f16_in, 4);
    /* nothing to convert */
    expect_cast(GC_F32, f32_in, GC_F16, f16_want, 0);
}

/* gc_element_f64 reads element i of each dtype exactly: -2.5 at index 1 of every array. */
static void test_element_f64(void) {
    const double f64[] = {0, -2.5};
    const float f32[] = {0, -2.5f};
    const int32_t i32[] = {0, -3};
    const uint16_t f16[] = {0, gc_f32_to_f16(-2.5f)}, bf16[] = {0, gc_f32_to_bf16(-2.5f)};
    CHECK(gc_element_f64(f64, GC_F64, 1) == -2.5);
    CHECK(gc_element_f64(f32, GC_F32, 1) == -2.5);
    CHECK(gc_element_f64(i32, GC_I32, 1) == -3);
    CHECK(gc_element_f64(f16, GC_F16, 1) == -2.5);
    CHECK(gc_element_f64(bf16, GC_BF16, 1) == -2.5);
    CHECK(gc_element_f64(f16, GC_F16, 0) == 0);
}

int main(void) {
    test_f16_known();
    test_element_f64();
    test_bf16_known();
    test_nearest_even_sweep();
    test_round_trips();
    test_cpu_cast();
    return gc_test_result();
}
