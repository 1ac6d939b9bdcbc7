/* Philox4x32-10 and the uniform and normal ops on the CPU: the published known answers,
 * the layout of the stream, each transform against its definition, the statistics of a
 * million draws, the rounding to every float dtype, the library's own log and cos
 * against libm, and the refused arguments. */
#include <float.h>

#include "check.h"
#include "tensor/philox_impl.h"

/* The references for log and cos are computed in long double, which must be wider than
 * double for them to be references (80-bit on x86-64, 128-bit on aarch64). */
_Static_assert(LDBL_MANT_DIG >= 64, "the log and cos references need a wide long double");

#define STATS_N 1000000

static const long double two_pi_l = 6.283185307179586476925286766559005768L;

/* A draw of n elements as a CPU tensor; a, b = lo, hi or mean, std. */
static gc_tensor *draw(gc_random_kind kind, int64_t n, gc_dtype dtype, double a, double b,
                       uint64_t seed, uint64_t offset) {
    gc_tensor *t = kind == GC_RANDOM_UNIFORM
                       ? gc_uniform(1, &n, dtype, gc_cpu(), a, b, seed, offset)
                       : gc_normal(1, &n, dtype, gc_cpu(), a, b, seed, offset);
    REQUIRE(t);
    return t;
}

/* The elements of a draw as doubles, in a malloc'ed array. */
static double *draw_f64(gc_random_kind kind, int64_t n, double a, double b, uint64_t seed,
                        uint64_t offset) {
    gc_tensor *t = draw(kind, n, GC_F64, a, b, seed, offset);
    double *values = malloc(sizeof(double) * (size_t)n);
    REQUIRE(values);
    gc_copy_to_host(t, values);
    gc_tensor_release(t);
    return values;
}

static void test_known_answers(void) {
    /* docs/philox4x32-10.md (Random123's kat_vectors) */
    static const struct {
        int rounds;
        uint32_t counter[4], key[2], out[4];
    } kat[] = {
        {10, {0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {10,
         {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {10,
         {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
        {7, {0, 0, 0, 0}, {0, 0}, {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    };
    for (size_t v = 0; v < sizeof kat / sizeof kat[0]; v++) {
        uint32_t out[4];
        gc_philox4x32(kat[v].counter, kat[v].key, kat[v].rounds, out);
        for (int j = 0; j < 4; j++)
            CHECK_MSG(out[j] == kat[v].out[j], "vector %zu word %d: got %08x, want %08x", v, j,
                      out[j], kat[v].out[j]);
    }
    /* Word w of seed 0 in block 0 is the first vector: counter 0, key 0. */
    for (uint64_t w = 0; w < 4; w++) CHECK(gc_philox_word(0, w) == kat[0].out[w]);
}

/* word(seed, w) = block(counter = (w/4 low, w/4 high, 0, 0), key = (seed low, seed high))[w % 4],
 * with words and seeds that use both 32-bit halves. */
static void test_word_layout(void) {
    const uint64_t seeds[] = {0, 1, 0x123456789abcdef0ull, UINT64_MAX};
    const uint64_t words[] = {0, 1, 2, 3, 4, 7, 4ull << 32, (4ull << 32) + 5, (1ull << 33) + 3,
                              UINT64_MAX};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
            uint64_t seed = seeds[s], w = words[k], block = w / 4;
            uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
            uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
            gc_philox4x32(counter, key, 10, out);
            CHECK_MSG(gc_philox_word(seed, w) == out[w % 4], "seed %llx word %llx",
                      (unsigned long long)seed, (unsigned long long)w);
        }
    }
    /* different seed halves give different streams */
    CHECK(gc_philox_word(1, 0) != gc_philox_word(1ull << 32, 0));
    CHECK(gc_uniform_words(5) == 5 && gc_normal_words(5) == 10 && gc_normal_words(0) == 0);
}

static double unit(uint32_t word) { return (double)(word >> 8) / 16777216.0; }

/* Uniform element i is lo + (hi - lo) u, u = (word(offset + i) >> 8) 2^-24, exactly (the
 * f64 draw keeps the double); also for a 0-dim tensor. */
static void test_uniform_definition(void) {
    const uint64_t seed = 0x9e3779b97f4a7c15ull, offset = 11;
    const int64_t n = 37;
    double *got = draw_f64(GC_RANDOM_UNIFORM, n, -3.0, 5.0, seed, offset);
    for (int64_t i = 0; i < n; i++) {
        double want = fma(8.0, unit(gc_philox_word(seed, offset + (uint64_t)i)), -3.0);
        CHECK_MSG(got[i] == want, "element %lld: got %.17g, want %.17g", (long long)i, got[i],
                  want);
    }
    free(got);

    gc_tensor *scalar = gc_uniform(0, NULL, GC_F64, gc_cpu(), 0.0, 1.0, seed, 5);
    REQUIRE(scalar);
    CHECK(scalar->ndim == 0 && gc_item(scalar) == unit(gc_philox_word(seed, 5)));
    gc_tensor_release(scalar);
}

/* Normal element i is mean + std z, z = sqrt(-2 log u1) cos(2 pi u2), u1 = 1 - unit(word
 * offset + 2i), u2 = unit(word offset + 2i + 1). The reference uses libm in long double;
 * the library's own log and cos are within a few double ulps of it (see below) and
 * |z| < 6, so 1e-14 absolute (about 20 ulps of the largest |z|) covers the difference,
 * while a swapped word, sin for cos or 2i for 2i + 1 changes z at the first digit. */
static void test_normal_definition(void) {
    const uint64_t seed = 0x243f6a8885a308d3ull, offset = 7;
    const int64_t n = 1001;
    double *got = draw_f64(GC_RANDOM_NORMAL, n, 0.0, 1.0, seed, offset);
    double *scaled = draw_f64(GC_RANDOM_NORMAL, n, 2.0, 3.0, seed, offset);
    for (int64_t i = 0; i < n; i++) {
        uint64_t w = offset + 2 * (uint64_t)i;
        long double u1 = 1.0L - unit(gc_philox_word(seed, w));
        long double u2 = unit(gc_philox_word(seed, w + 1));
        double want = (double)(sqrtl(-2.0L * logl(u1)) * cosl(two_pi_l * u2));
        CHECK_NEAR(got[i], want, 1e-14, 0.0);
        /* mean and std enter as one fma on the same z */
        CHECK_MSG(scaled[i] == fma(3.0, got[i], 2.0), "element %lld: got %.17g from z %.17g",
                  (long long)i, scaled[i], got[i]);
    }
    free(got);
    free(scaled);
}

/* Drawing n elements and then m more from where the first draw stopped gives the same
 * numbers as drawing n + m at once; n and the offset are odd, so the draws start and end
 * inside Philox blocks. */
static void test_continuation(void) {
    const uint64_t seed = 77, offset = 3;
    const int64_t n = 5, m = 7, total = n + m;
    for (int k = 0; k < 2; k++) {
        gc_random_kind kind = k ? GC_RANDOM_NORMAL : GC_RANDOM_UNIFORM;
        uint64_t used = kind == GC_RANDOM_UNIFORM ? gc_uniform_words(n) : gc_normal_words(n);
        gc_tensor *first = draw(kind, n, GC_F32, -1.0, 2.0, seed, offset);
        gc_tensor *second = draw(kind, m, GC_F32, -1.0, 2.0, seed, offset + used);
        gc_tensor *whole = draw(kind, total, GC_F32, -1.0, 2.0, seed, offset);
        const float *w = gc_data(whole);
        CHECK(memcmp(w, gc_data(first), sizeof(float) * (size_t)n) == 0);
        CHECK(memcmp(w + n, gc_data(second), sizeof(float) * (size_t)m) == 0);
        /* and a different offset is a different draw */
        gc_tensor *shifted = draw(kind, total, GC_F32, -1.0, 2.0, seed, offset + 1);
        CHECK(memcmp(w, gc_data(shifted), sizeof(float) * (size_t)total) != 0);
        gc_tensor_release(first);
        gc_tensor_release(second);
        gc_tensor_release(whole);
        gc_tensor_release(shifted);
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double uniform_cdf(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }
static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Kolmogorov-Smirnov: sqrt(n) max |F_n(x) - F(x)| over the sorted sample. */
static double ks_statistic(double *sample, size_t n, double (*cdf)(double)) {
    qsort(sample, n, sizeof *sample, compare_doubles);
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double f = cdf(sample[i]);
        double below = f - (double)i / (double)n, above = (double)(i + 1) / (double)n - f;
        if (below > d) d = below;
        if (above > d) d = above;
    }
    return sqrt((double)n) * d;
}

static void moments(const double *x, size_t n, double *mean, double *variance) {
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < n; i++) sum += x[i];
    *mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) sum_sq += (x[i] - *mean) * (x[i] - *mean);
    *variance = sum_sq / (double)(n - 1);
}

/* The bounds below are 6 standard errors of each statistic for n = 10^6 draws: a correct
 * generator falls outside with probability about 2e-9 (and the seeds are fixed, so the
 * test is deterministic), while a skewed or wrongly scaled transform misses by far more.
 *   uniform [0, 1): mean 1/2, SE sqrt(1/12 / n) = 2.9e-4; variance 1/12, SE
 *     sqrt((1/80 - 1/144) / n) = 7.5e-5 (the fourth central moment is 1/80);
 *   normal: mean 0, SE 1/sqrt(n) = 1e-3; variance 1, SE sqrt(2 / n) = 1.4e-3.
 * Kolmogorov-Smirnov: P(sqrt(n) D > 2.5) ~ 2 exp(-2 2.5^2) = 7.5e-6 for the true
 * distribution; the 2^-24 grid of u moves the CDF by about 2^-24, far below it. */
static void test_statistics(void) {
    double mean, variance;
    double *u = draw_f64(GC_RANDOM_UNIFORM, STATS_N, 0.0, 1.0, 2024, 0);
    double lowest = 1, highest = 0;
    for (size_t i = 0; i < STATS_N; i++) {
        if (u[i] < lowest) lowest = u[i];
        if (u[i] > highest) highest = u[i];
    }
    CHECK(lowest >= 0.0 && highest < 1.0);
    moments(u, STATS_N, &mean, &variance);
    CHECK_NEAR(mean, 0.5, 6 * 2.9e-4, 0);
    CHECK_NEAR(variance, 1.0 / 12, 6 * 7.5e-5, 0);
    double ks = ks_statistic(u, STATS_N, uniform_cdf);
    CHECK_MSG(ks < 2.5, "uniform: sqrt(n) D = %g", ks);
    free(u);

    double *z = draw_f64(GC_RANDOM_NORMAL, STATS_N, 0.0, 1.0, 2025, 0);
    double largest = 0;
    for (size_t i = 0; i < STATS_N; i++) largest = fmax(largest, fabs(z[i]));
    CHECK_MSG(largest <= sqrt(-2 * log(0x1p-24)), "normal: |z| reached %g", largest);
    moments(z, STATS_N, &mean, &variance);
    CHECK_NEAR(mean, 0.0, 6 * 1e-3, 0);
    CHECK_NEAR(variance, 1.0, 6 * 1.4e-3, 0);
    ks = ks_statistic(z, STATS_N, normal_cdf);
    CHECK_MSG(ks < 2.5, "normal: sqrt(n) D = %g", ks);
    free(z);
}

/* f32 is the double rounded once (to nearest even); f16 and bf16 are that f32 rounded to
 * nearest even; f64 is the double itself. The parameters make the doubles need rounding. */
static void test_dtypes(void) {
    const int64_t n = 1000;
    for (int k = 0; k < 2; k++) {
        gc_random_kind kind = k ? GC_RANDOM_NORMAL : GC_RANDOM_UNIFORM;
        double a = k ? 0.3 : -3.0, b = k ? 2.7 : 5.1;
        double *want = draw_f64(kind, n, a, b, 99, 1);
        gc_tensor *f32 = draw(kind, n, GC_F32, a, b, 99, 1);
        gc_tensor *f16 = draw(kind, n, GC_F16, a, b, 99, 1);
        gc_tensor *bf16 = draw(kind, n, GC_BF16, a, b, 99, 1);
        const float *f32_data = gc_data(f32);
        const uint16_t *f16_data = gc_data(f16), *bf16_data = gc_data(bf16);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float rounded = (float)want[i];
            bad += f32_data[i] != rounded || f16_data[i] != gc_f32_to_f16(rounded) ||
                   bf16_data[i] != gc_f32_to_bf16(rounded);
        }
        CHECK_MSG(bad == 0, "%s: %d of %lld elements differ", k ? "normal" : "uniform", bad,
                  (long long)n);
        free(want);
        gc_tensor_release(f32);
        gc_tensor_release(f16);
        gc_tensor_release(bf16);
    }
    /* An empty draw is fine and touches nothing. */
    gc_tensor *empty = gc_normal(GC_SHAPE(0, 3), GC_F16, gc_cpu(), 0.0, 1.0, 1, 0);
    REQUIRE(empty);
    CHECK(gc_numel(empty) == 0);
    gc_tensor_release(empty);
}

/* The library's log and cos against libm's in long double over every u the generator
 * produces (k 2^-24, all 2^24 of them), and log also over the whole normal range.
 * Bounds: log within 1e-15 relative (about 4.5 double ulps; the atanh series leaves out
 * under 2^-60 and the few roundings of the division and Horner's rule add a couple of
 * ulps). cos within 1e-15 relative plus 1e-18 absolute: the reference's own argument,
 * 2 pi u in long double, is off by up to 2 pi 2^-64 = 3.4e-19, which is all that is
 * left near the zeros at u = 1/4 and 3/4, where the reduction in u keeps the library's
 * cos accurate in relative terms. */
static double log_error(double x) {
    long double want = logl(x);
    return want == 0 ? fabs(gc_philox_log(x)) : (double)fabsl((gc_philox_log(x) - want) / want);
}

static void test_log_cos_accuracy(void) {
    double log_worst = 0, cos_worst = 0;
    for (uint32_t k = 1; k <= 1u << 24; k++) {
        double u = k * 0x1p-24;
        log_worst = fmax(log_worst, log_error(u));

        double v = (k - 1) * 0x1p-24; /* u2 in [0, 1) */
        long double cos_want = cosl(two_pi_l * v);
        double cos_error = (double)fabsl(gc_philox_cos_2pi(v) - cos_want);
        cos_worst = fmax(cos_worst, cos_error / (1e-15 * (double)fabsl(cos_want) + 1e-18));
    }
    for (int e = -1022; e <= 1023; e++) {
        for (int j = 0; j < 64; j++)
            log_worst = fmax(log_worst, log_error(ldexp(1.0 + j / 64.0, e)));
    }
    fprintf(stderr, "log: worst relative error %.3g; cos: worst error %.3g of its bound\n",
            log_worst, cos_worst);
    CHECK_MSG(log_worst <= 1e-15, "log: relative error %g", log_worst);
    CHECK_MSG(cos_worst <= 1.0, "cos: error %g times the bound", cos_worst);
    /* exact values where the reduction makes them exact */
    CHECK(gc_philox_cos_2pi(0.0) == 1.0 && gc_philox_cos_2pi(0.5) == -1.0);
    CHECK(gc_philox_cos_2pi(0.25) == 0.0 && gc_philox_log(1.0) == 0.0);
}

static void uniform_i32(void *arg) {
    (void)arg;
    gc_uniform(GC_SHAPE(2, 3), GC_I32, gc_cpu(), 0.0, 1.0, 1, 0);
}
static void normal_i32(void *arg) {
    (void)arg;
    gc_normal(GC_SHAPE(4), GC_I32, gc_cpu(), 0.0, 1.0, 1, 0);
}
static void uniform_reversed(void *arg) {
    (void)arg;
    gc_uniform(GC_SHAPE(4), GC_F32, gc_cpu(), 1.0, 0.0, 1, 0);
}
static void uniform_infinite(void *arg) {
    (void)arg;
    gc_uniform(GC_SHAPE(4), GC_F32, gc_cpu(), -DBL_MAX, DBL_MAX, 1, 0);
}
static void normal_negative_std(void *arg) {
    (void)arg;
    gc_normal(GC_SHAPE(4), GC_F32, gc_cpu(), 0.0, -1.0, 1, 0);
}
static void normal_nan_mean(void *arg) {
    (void)arg;
    gc_normal(GC_SHAPE(4), GC_F32, gc_cpu(), NAN, 1.0, 1, 0);
}
static void negative_words(void *arg) {
    (void)arg;
    gc_normal_words(-1);
}
static void negative_rounds(void *arg) {
    (void)arg;
    uint32_t counter[4] = {0}, key[2] = {0}, out[4];
    gc_philox4x32(counter, key, -1, out);
}

static void test_errors(void) {
    gc_test_expect_fatal(uniform_i32, NULL,
                         "uniform: needs a floating-point dtype, got i32 for shape [2, 3]");
    gc_test_expect_fatal(normal_i32, NULL, "normal: needs a floating-point dtype, got i32");
    gc_test_expect_fatal(uniform_reversed, NULL, "uniform: bad range [1, 0)");
    gc_test_expect_fatal(uniform_infinite, NULL, "uniform: bad range");
    gc_test_expect_fatal(normal_negative_std, NULL, "normal: bad mean 0 or std -1");
    gc_test_expect_fatal(normal_nan_mean, NULL, "normal: bad mean nan");
    gc_test_expect_fatal(negative_words, NULL, "normal_words: negative element count -1");
    gc_test_expect_fatal(negative_rounds, NULL, "philox4x32: -1 rounds");
}

int main(void) {
    test_known_answers();
    test_word_layout();
    test_uniform_definition();
    test_normal_definition();
    test_continuation();
    test_statistics();
    test_dtypes();
    test_log_cos_accuracy();
    test_errors();
    return gc_test_result();
}
