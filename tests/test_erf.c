/* The CPU's float erf and exp (tensor/cpu/erf_cpu.h), and the f32 gelu (erf form) and its
 * derivative that use them, against libm's double functions: their error is far below a
 * float ulp, so the error measured is the float code's.
 *
 * Tolerances, with the largest errors that a sweep of every float measured (`test_erf
 * --all`, about ten minutes of CPU; the suite checks every 4099th float, an odd stride that
 * reaches every binade and every pattern of low bits, plus the special values and the
 * floats around each boundary between formulas):
 *  - erf: 1.5 ulp of the exact value (measured: 1.078 ulp, at 1.0144). The target is 2 ulp
 *    of the correctly rounded value, itself within half an ulp of the exact one; the check
 *    is tighter so that a refit which loses accuracy fails it. (glibc's erff: 0.92 ulp;
 *    glibc's numbers here are over every 17th float.)
 *  - e^y for y <= 0: 1.5 ulp, subnormal results included (measured: 0.989 ulp).
 *  - gelu(x) = x Phi(x) and its derivative Phi(x) + x phi(x): 4 ulp (measured for x >= 0:
 *    1.71 ulp for gelu, 1.87 for the derivative; glibc's erff and expf in the same
 *    formulas: 1.73 and 1.81) or, for x < 0, 1e-7 |x| absolute for gelu and 1e-7 for the
 *    derivative. For x < 0, 1 + erf(x / sqrt 2) cancels (to 0.003 at x = -4, 2e-23 at
 *    x = -10) and erf's error, up to an ulp of its value (2^-24 = 6e-8 near -1), is left
 *    as an absolute error of up to 3e-8 in Phi (times |x| in gelu; the derivative adds the
 *    rounding of x phi(x)): no float erf avoids that (glibc's erff has it too), and the
 *    CUDA tests allow for it between the backends (tests/test_elementwise_cuda.c).
 *    Measured: 5.2e-8 |x| for gelu, 7.2e-8 for the derivative (glibc's: 5.1e-8 |x| and
 *    5.8e-8).
 *  - special values as PyTorch gives them: gelu(+inf) = +inf, gelu(-inf) = nan (-inf
 *    times 1 + erf = 0), the derivative nan at +-inf (x phi(x) is inf times 0), nan stays
 *    nan; erf(+-inf) = +-1, erf(-0) = -0; e^-inf = 0. */
#include <float.h>
#include <stdint.h>

#include "check.h"
#include "tensor/cpu/erf_cpu.h"
#include "tensor/cpu/kernels_cpu.h"

#define SUITE_STRIDE 4099u
#define CHUNK 65536
#define SQRT_HALF 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define ERF_MAX_ULPS 1.5
#define EXP_MAX_ULPS 1.5
#define GELU_MAX_ULPS 4.0
#define TAIL_ATOL 1e-7 /* for x < 0: the bound on gelu's error over |x|, and on the derivative's */
#define FAILURES_SHOWN 10

static double gelu_reference(double x) { return 0.5 * x * erfc(-x * SQRT_HALF); }
static double gelu_grad_reference(double x) { return 0.5 * erfc(-x * SQRT_HALF) + x * INV_SQRT_2PI * exp(-0.5 * x * x); }

/* The spacing of floats at |value| (that of the subnormals below 2^-126). */
static double float_ulp_at(double value) {
    int exponent;
    frexp(fabs(value), &exponent);
    return ldexp(1.0, exponent - 24 < -149 ? -149 : exponent - 24);
}

/* |got - want| in ulps of want; 0 where both are the same infinity or both nan. */
static double ulp_error(float got, double want) {
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want) ? 0 : INFINITY;
    if ((double)got == want) return 0;
    return fabs(got - want) / float_ulp_at(want);
}

/* How an error for x < 0, where 1 + erf cancels, may pass beyond the ulp tolerance. */
typedef enum tail_allowance {
    NO_TAIL,      /* erf, exp: ulps only */
    TAIL_SCALED,  /* gelu: within TAIL_ATOL |x| */
    TAIL_ABSOLUTE /* the derivative: within TAIL_ATOL (Phi's error is not scaled by x) */
} tail_allowance;

/* One function's tolerance and the largest errors seen. */
typedef struct accuracy {
    const char *name;
    double max_ulps;
    tail_allowance tail;
    double worst_ulps; /* over every x for erf and exp, over x >= 0 for the gelus */
    float worst_ulps_at;
    double worst_tail_ulps; /* x < 0 */
    float worst_tail_ulps_at;
    double worst_tail; /* x < 0: |error|, over |x| for TAIL_SCALED, where the result is a normal float */
    float worst_tail_at;
    long failures;
} accuracy;

static accuracy erf_accuracy = {.name = "erf", .max_ulps = ERF_MAX_ULPS, .tail = NO_TAIL};
static accuracy exp_accuracy = {.name = "exp (y <= 0)", .max_ulps = EXP_MAX_ULPS, .tail = NO_TAIL};
static accuracy gelu_accuracy = {.name = "gelu", .max_ulps = GELU_MAX_ULPS, .tail = TAIL_SCALED};
static accuracy grad_accuracy = {.name = "gelu derivative", .max_ulps = GELU_MAX_ULPS, .tail = TAIL_ABSOLUTE};

static void keep_worst(double error, float x, double *worst, float *worst_at) {
    if (error > *worst) {
        *worst = error;
        *worst_at = x;
    }
}

static void record(accuracy *acc, float x, float got, double want) {
    double ulps = ulp_error(got, want);
    bool in_tail = acc->tail != NO_TAIL && x < 0;
    double tail_error = INFINITY; /* an inf or nan where the other is not never passes */
    if (in_tail && isfinite(got) && isfinite(want))
        tail_error = fabs(got - want) / (acc->tail == TAIL_SCALED ? -(double)x : 1.0);
    if (in_tail) {
        keep_worst(ulps, x, &acc->worst_tail_ulps, &acc->worst_tail_ulps_at);
        if (isfinite(tail_error) && fabs(want) >= FLT_MIN)
            keep_worst(tail_error, x, &acc->worst_tail, &acc->worst_tail_at);
    } else {
        keep_worst(ulps, x, &acc->worst_ulps, &acc->worst_ulps_at);
    }
    if (ulps <= acc->max_ulps || (in_tail && tail_error <= TAIL_ATOL)) return;
    if (acc->failures++ < FAILURES_SHOWN)
        fprintf(stderr, "%s(%a) = %a, want %a (%.3g ulp)\n", acc->name, x, got, want, ulps);
}

static bool same_bits(float a, float b) { return gc_f32_bits(a) == gc_f32_bits(b); }

/* The gelu loops of every other instruction set this CPU has give the portable loop's bits
 * (gelu and grad) on x[0 .. n); mismatches are counted here and checked once, in main. */
static long simd_mismatches, simd_values_compared;

static void check_same_bits_as_portable(const float *x, size_t n, const float *gelu, const float *grad) {
    static float simd[CHUNK];
    for (gc_cpu_isa isa = GC_ISA_PORTABLE + 1; isa < GC_ISA_COUNT; isa++) {
        if (!gc_cpu_isa_available(isa)) continue;
        for (int derivative = 0; derivative < 2; derivative++) {
            gc_cpu_gelu_erf_on(isa, derivative, x, simd, n);
            const float *want = derivative ? grad : gelu;
            for (size_t i = 0; i < n; i++)
                if (!same_bits(simd[i], want[i]) && simd_mismatches++ < FAILURES_SHOWN)
                    fprintf(stderr, "%s gelu%s(%a) = %a, portable %a\n", gc_cpu_isa_name(isa),
                            derivative ? " derivative" : "", x[i], simd[i], want[i]);
            simd_values_compared += (long)n;
        }
    }
}

/* The backward's fused loop g * gelu'(x), on every instruction set this CPU has including
 * the portable one, gives the bits of the derivative rounded to float and then multiplied
 * (what the composed backward computes), for gradients of a few signs and scales. */
static long fused_mismatches;

static void check_fused_backward(const float *x, size_t n, const float *grad) {
    static float g[CHUNK], fused[CHUNK];
    for (size_t i = 0; i < n; i++) g[i] = (float)((int)(i % 7) - 3) * 0.37f + 0x1p-20f;
    for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++) {
        if (!gc_cpu_isa_available(isa)) continue;
        gc_cpu_gelu_erf_grad_on(isa, x, g, fused, n);
        for (size_t i = 0; i < n; i++)
            if (!same_bits(fused[i], g[i] * grad[i]) && fused_mismatches++ < FAILURES_SHOWN)
                fprintf(stderr, "%s %a * gelu'(%a) = %a, want %a\n", gc_cpu_isa_name(isa), g[i], x[i], fused[i],
                        g[i] * grad[i]);
    }
}

/* Every check on each of x[0 .. n): erf and exp directly, the gelus through the portable
 * loop, and the other instruction sets' loops and the fused backward against it. */
static void check_values(const float *x, size_t n) {
    static float gelu[CHUNK], grad[CHUNK];
    REQUIRE(n <= CHUNK);
    gc_cpu_gelu_erf_on(GC_ISA_PORTABLE, false, x, gelu, n);
    gc_cpu_gelu_erf_on(GC_ISA_PORTABLE, true, x, grad, n);
    check_same_bits_as_portable(x, n, gelu, grad);
    check_fused_backward(x, n, grad);
    for (size_t i = 0; i < n; i++) {
        record(&erf_accuracy, x[i], gc_erf_f32(x[i]), erf(x[i]));
        if (!(x[i] > 0)) record(&exp_accuracy, x[i], gc_exp_nonpositive_f32(x[i]), exp(x[i]));
        record(&gelu_accuracy, x[i], gelu[i], gelu_reference(x[i]));
        record(&grad_accuracy, x[i], grad[i], gelu_grad_reference(x[i]));
    }
}

/* Every stride-th bit pattern, a chunk at a time. */
static void sweep(uint32_t stride) {
    static float chunk[CHUNK];
    size_t n = 0;
    for (uint64_t bits = 0; bits <= UINT32_MAX; bits += stride) {
        chunk[n++] = gc_f32_from_bits((uint32_t)bits);
        if (n == CHUNK) {
            check_values(chunk, n);
            n = 0;
        }
    }
    check_values(chunk, n);
}

/* The 64 floats either side of each place where a formula changes, both signs: erf's
 * polynomial to its tail and its tail to 1 (as erf arguments, and as gelu inputs x =
 * z sqrt 2), and where e^y is clamped to 0 (y = -104, reached by the derivative's
 * e^(-x^2 / 2) at x = sqrt 208). */
static void check_boundaries(void) {
    const float centres[] = {GC_ERF_SMALL_MAX, GC_ERF_ONE_FROM, GC_ERF_SMALL_MAX / (float)SQRT_HALF,
                             GC_ERF_ONE_FROM / (float)SQRT_HALF, GC_EXP_ZERO_BELOW, 14.4222051f};
    for (size_t c = 0; c < sizeof centres / sizeof *centres; c++)
        for (int sign = -1; sign <= 1; sign += 2) {
            float values[129];
            uint32_t centre = gc_f32_bits(sign * centres[c]);
            for (int i = 0; i < 129; i++) values[i] = gc_f32_from_bits(centre - 64u + (uint32_t)i);
            check_values(values, 129);
        }
}


static void check_special_values(void) {
    const float specials[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, FLT_MIN - 0x1p-149f, -(FLT_MIN - 0x1p-149f),
                              FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN};
    check_values(specials, sizeof specials / sizeof *specials);
    CHECK(same_bits(gc_erf_f32(-0.0f), -0.0f) && same_bits(gc_erf_f32(0.0f), 0.0f));
    CHECK(gc_erf_f32(INFINITY) == 1.0f && gc_erf_f32(-INFINITY) == -1.0f && isnan(gc_erf_f32(NAN)));
    CHECK(gc_exp_nonpositive_f32(-INFINITY) == 0.0f && gc_exp_nonpositive_f32(-0.0f) == 1.0f);
    CHECK(isnan(gc_exp_nonpositive_f32(NAN)));
    const float x[4] = {INFINITY, -INFINITY, NAN, -FLT_MAX};
    float gelu[4], grad[4];
    gc_cpu_unary(GC_UNARY_GELU_ERF, x, gelu, 4, GC_F32);
    gc_cpu_unary(GC_UNARY_GELU_ERF_GRAD, x, grad, 4, GC_F32);
    CHECK(gelu[0] == INFINITY && isnan(gelu[1]) && isnan(gelu[2]) && same_bits(gelu[3], -0.0f));
    CHECK(isnan(grad[0]) && isnan(grad[1]) && isnan(grad[2]) && grad[3] == 0.0f);
}

/* Prints the largest errors (the numbers quoted above) and fails on any value outside the
 * tolerance. */
static void report(const accuracy *acc) {
    CHECK_MSG(acc->failures == 0, "%s: %ld values outside the tolerance", acc->name, acc->failures);
    fprintf(stderr, "%-16s max %.3f ulp at %.9g", acc->name, acc->worst_ulps, acc->worst_ulps_at);
    if (acc->tail != NO_TAIL)
        fprintf(stderr, " (x >= 0); x < 0: max %.3g ulp at %.9g, %.3g%s absolute at %.9g", acc->worst_tail_ulps,
                acc->worst_tail_ulps_at, acc->worst_tail, acc->tail == TAIL_SCALED ? " |x|" : "", acc->worst_tail_at);
    fprintf(stderr, "\n");
}

int main(int argc, char **argv) {
    bool all = argc == 2 && strcmp(argv[1], "--all") == 0;
    if (argc > 1 && !all) {
        fprintf(stderr, "usage: %s [--all]   (--all: every float, instead of every %uth)\n", argv[0], SUITE_STRIDE);
        return GC_TEST_SETUP_ERROR;
    }
    sweep(all ? 1 : SUITE_STRIDE);
    check_boundaries();
    check_special_values();
    CHECK_MSG(simd_mismatches == 0, "%ld of %ld SIMD gelu values differ from the portable loop's", simd_mismatches,
              simd_values_compared);
    if (!simd_values_compared) fprintf(stderr, "no SIMD gelu loop on this CPU or build: compared none\n");
    CHECK_MSG(fused_mismatches == 0, "%ld fused gelu backward values differ from g * gelu'(x)", fused_mismatches);
    report(&erf_accuracy);
    report(&exp_accuracy);
    report(&gelu_accuracy);
    report(&grad_accuracy);
    return gc_test_result();
}
