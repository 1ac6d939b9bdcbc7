/* Layer normalisation on the CPU against hand-computed values: the normalised rows, the
 * saved mean and rstd, gamma and beta, eps, the dtypes, the errors; and the f32 rows' AVX2
 * build, forward and backward, bit for bit the portable one's. */
#include "check.h"
#include "tensor/cpu/kernels_cpu.h"
#include "values.h"

/* A result computed in double and rounded once to f32 (y, and the saved mean and rstd,
 * which are always f32) is within half an f32 ulp of the exact value: 2^-24 relative. */
#define F32_ROUNDING (1.0 / (1 << 24))
#define EPS 1e-5

static void release_all(gc_tensor **tensors, size_t count) {
    for (size_t i = 0; i < count; i++) gc_tensor_release(tensors[i]);
}

/* Rows [1, 2, 3, 4] (mean 2.5, biased variance 1.25) and [10, 10, 10, 14] (mean 11,
 * variance (1 + 1 + 1 + 9) / 4 = 3), with no gamma or beta. */
static void test_hand_values(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 4), (const double[]){1, 2, 3, 4, 10, 10, 10, 14});
    gc_tensor *mean = NULL, *rstd = NULL, *y = gc_layernorm(x, NULL, NULL, EPS, &mean, &rstd);
    double r0 = 1 / sqrt(1.25 + EPS), r1 = 1 / sqrt(3 + EPS);
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 4),
                          (const double[]){-1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0, -r1, -r1, -r1, 3 * r1}, 0,
                          F32_ROUNDING, "layernorm y");
    gc_test_expect_values(mean, GC_F32, GC_SHAPE(2), (const double[]){2.5, 11}, 0, 0, "layernorm mean");
    gc_test_expect_values(rstd, GC_F32, GC_SHAPE(2), (const double[]){r0, r1}, 0, F32_ROUNDING, "layernorm rstd");
    release_all((gc_tensor *[]){x, y, mean, rstd}, 4);
}

/* y = (x - mean) * rstd * gamma + beta, each of gamma and beta optional. */
static void test_gamma_beta(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(1, 4), (const double[]){1, 2, 3, 4});
    gc_tensor *gamma = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){2, 0.5, 1, -1});
    gc_tensor *beta = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){0.5, -1, 0.25, 2});
    gc_tensor *both = gc_layernorm(x, gamma, beta, EPS, NULL, NULL);
    gc_tensor *gamma_only = gc_layernorm(x, gamma, NULL, EPS, NULL, NULL);
    gc_tensor *beta_only = gc_layernorm(x, NULL, beta, EPS, NULL, NULL);
    double r = 1 / sqrt(1.25 + EPS);
    gc_test_expect_values(both, GC_F32, GC_SHAPE(1, 4),
                          (const double[]){-3 * r + 0.5, -0.25 * r - 1, 0.5 * r + 0.25, -1.5 * r + 2}, 0,
                          F32_ROUNDING, "layernorm with gamma and beta");
    gc_test_expect_values(gamma_only, GC_F32, GC_SHAPE(1, 4), (const double[]){-3 * r, -0.25 * r, 0.5 * r, -1.5 * r},
                          0, F32_ROUNDING, "layernorm with gamma");
    gc_test_expect_values(beta_only, GC_F32, GC_SHAPE(1, 4),
                          (const double[]){-1.5 * r + 0.5, -0.5 * r - 1, 0.5 * r + 0.25, 1.5 * r + 2}, 0,
                          F32_ROUNDING, "layernorm with beta");
    release_all((gc_tensor *[]){x, gamma, beta, both, gamma_only, beta_only}, 6);
}

/* eps keeps a constant row finite (its variance is 0: y = 0 + beta, rstd = 1/sqrt(eps))
 * and damps the others (variance 1.25, eps 1: rstd = 1/sqrt(2.25) = 2/3). */
static void test_eps(void) {
    gc_tensor *constant = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){5, 5, 5, 5});
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){1, 2, 3, 4});
    gc_tensor *beta = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){0, 1, -2, 0.5});
    gc_tensor *mean = NULL, *rstd = NULL, *damped_rstd = NULL;
    gc_tensor *y = gc_layernorm(constant, NULL, NULL, 0.01, &mean, &rstd);
    gc_tensor *shifted = gc_layernorm(constant, NULL, beta, 0.01, NULL, NULL);
    gc_tensor *damped = gc_layernorm(x, NULL, NULL, 1.0, NULL, &damped_rstd);
    /* a 1-D x has one row: its statistics are 0-dim */
    gc_test_expect_values(y, GC_F32, GC_SHAPE(4), (const double[]){0, 0, 0, 0}, 0, 0, "layernorm of a constant row");
    gc_test_expect_values(mean, GC_F32, 0, NULL, (const double[]){5}, 0, 0, "mean of a constant row");
    gc_test_expect_values(rstd, GC_F32, 0, NULL, (const double[]){10}, 0, F32_ROUNDING, "rstd of a constant row");
    gc_test_expect_values(shifted, GC_F32, GC_SHAPE(4), (const double[]){0, 1, -2, 0.5}, 0, 0,
                          "layernorm of a constant row with beta");
    gc_test_expect_values(damped, GC_F32, GC_SHAPE(4), (const double[]){-1, -1.0 / 3, 1.0 / 3, 1}, 0, F32_ROUNDING,
                          "layernorm with eps 1");
    gc_test_expect_values(damped_rstd, GC_F32, 0, NULL, (const double[]){2.0 / 3}, 0, F32_ROUNDING, "rstd with eps 1");
    release_all((gc_tensor *[]){constant, x, beta, mean, rstd, damped_rstd, y, shifted, damped}, 9);
}

/* x [2, 2, 3]: the statistics have x's leading shape [2, 2]. */
static void test_3d(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 2, 3), (const double[]){0, 1, 2, 3, 3, 3, 1, 2, 6, -2, 0, 2});
    gc_tensor *mean = NULL, *rstd = NULL, *y = gc_layernorm(x, NULL, NULL, EPS, &mean, &rstd);
    /* variances 2/3, 0, (4 + 1 + 9) / 3 = 14/3, 8/3 */
    double r[4] = {1 / sqrt(2.0 / 3 + EPS), 1 / sqrt(EPS), 1 / sqrt(14.0 / 3 + EPS), 1 / sqrt(8.0 / 3 + EPS)};
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 2, 3),
                          (const double[]){-r[0], 0, r[0], 0, 0, 0, -2 * r[2], -r[2], 3 * r[2], -2 * r[3], 0, 2 * r[3]},
                          0, F32_ROUNDING, "layernorm 3-D");
    gc_test_expect_values(mean, GC_F32, GC_SHAPE(2, 2), (const double[]){1, 3, 3, 0}, 0, 0, "layernorm 3-D mean");
    gc_test_expect_values(rstd, GC_F32, GC_SHAPE(2, 2), r, 0, F32_ROUNDING, "layernorm 3-D rstd");
    release_all((gc_tensor *[]){x, y, mean, rstd}, 4);
}

/* f64, with a mean of 1e9 against a spread of 1: the two-pass variance is exactly 1.25,
 * where E[x^2] - E[x]^2 would lose everything (x^2 ~ 1e18 has an ulp of 128). The
 * normalised values take a few double roundings: 1e-15 relative. The saved statistics
 * stay f32. */
static void test_f64_large_mean(void) {
    gc_tensor *x = gc_test_tensor(GC_F64, GC_SHAPE(4), (const double[]){1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4});
    gc_tensor *gamma = gc_test_tensor(GC_F64, GC_SHAPE(4), (const double[]){0.1, 0.2, 0.3, 0.4});
    gc_tensor *mean = NULL, *rstd = NULL, *y = gc_layernorm(x, gamma, NULL, EPS, &mean, &rstd);
    double r = 1 / sqrt(1.25 + EPS);
    gc_test_expect_values(y, GC_F64, GC_SHAPE(4), (const double[]){-0.15 * r, -0.1 * r, 0.15 * r, 0.6 * r}, 0, 1e-15,
                          "layernorm f64");
    gc_test_expect_values(mean, GC_F32, 0, NULL, (const double[]){1e9 + 2.5}, 0, F32_ROUNDING, "layernorm f64 mean");
    gc_test_expect_values(rstd, GC_F32, 0, NULL, (const double[]){r}, 0, F32_ROUNDING, "layernorm f64 rstd");
    release_all((gc_tensor *[]){x, gamma, y, mean, rstd}, 5);
}

/* f16 and bf16 x, gamma and beta: y computed in double and rounded once, within 2^-11
 * (f16, 11 significant bits) or 2^-8 (bf16, 8 bits) relative. */
static void test_half_types(void) {
    static const gc_dtype dtypes[] = {GC_F16, GC_BF16};
    double r = 1 / sqrt(1.25 + EPS);
    for (int d = 0; d < 2; d++) {
        gc_tensor *x = gc_test_tensor(dtypes[d], GC_SHAPE(1, 4), (const double[]){1, 2, 3, 4});
        gc_tensor *gamma = gc_test_tensor(dtypes[d], GC_SHAPE(4), (const double[]){2, 0.5, 1, -1});
        gc_tensor *beta = gc_test_tensor(dtypes[d], GC_SHAPE(4), (const double[]){0.5, -1, 0.25, 2});
        gc_tensor *rstd = NULL, *y = gc_layernorm(x, gamma, beta, EPS, NULL, &rstd);
        double rounding = dtypes[d] == GC_BF16 ? 1.0 / 256 : 1.0 / 2048;
        gc_test_expect_values(y, dtypes[d], GC_SHAPE(1, 4),
                              (const double[]){-3 * r + 0.5, -0.25 * r - 1, 0.5 * r + 0.25, -1.5 * r + 2}, 0, rounding,
                              "layernorm f16/bf16");
        gc_test_expect_values(rstd, GC_F32, GC_SHAPE(1), (const double[]){r}, 0, F32_ROUNDING, "layernorm f16/bf16 rstd");
        release_all((gc_tensor *[]){x, gamma, beta, y, rstd}, 5);
    }
}

/* A row of 600 (past the kernel's chunk of 256), x[j] = j, gamma[j] = 1 + j/1024,
 * beta[j] = -j/512: mean 299.5, biased variance (600^2 - 1) / 12. The reference is the
 * same double arithmetic on the same exact inputs, so only the final f32 rounding differs. */
static void test_long_row(void) {
    enum { cols = 600 };
    double x_data[cols], gamma_data[cols], beta_data[cols], want[cols];
    double r = 1 / sqrt((cols * cols - 1) / 12.0 + EPS);
    for (int j = 0; j < cols; j++) {
        x_data[j] = j;
        gamma_data[j] = 1 + j / 1024.0;
        beta_data[j] = -j / 512.0;
        want[j] = (j - 299.5) * r * gamma_data[j] + beta_data[j];
    }
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(cols), x_data);
    gc_tensor *gamma = gc_test_tensor(GC_F32, GC_SHAPE(cols), gamma_data);
    gc_tensor *beta = gc_test_tensor(GC_F32, GC_SHAPE(cols), beta_data);
    gc_tensor *mean = NULL, *y = gc_layernorm(x, gamma, beta, EPS, &mean, NULL);
    gc_test_expect_values(y, GC_F32, GC_SHAPE(cols), want, 0, F32_ROUNDING, "layernorm of 600 columns");
    gc_test_expect_values(mean, GC_F32, 0, NULL, (const double[]){299.5}, 0, 0, "mean of 600 columns");
    release_all((gc_tensor *[]){x, gamma, beta, y, mean}, 5);
}

/* The f32 rows have a kernel of their own, reading the floats directly; it does the double
 * arithmetic of the generic one, so layernorm of f32 x equals the f64 layernorm of the
 * same values rounded once to f32, bit for bit: y and dx, and gamma's gradient where there
 * is one row (the f32 one sums f32 terms over rows, the f64 one f64 terms). Rows shorter
 * than a lane group, of a chunk, and past several chunks with a tail; gamma and beta given
 * or not. */
static gc_tensor *layernorm_and_backward(const gc_tensor *x_values, const gc_tensor *gamma_values,
                                         const gc_tensor *g_values, bool affine, gc_dtype dtype, gc_tensor **dx,
                                         gc_tensor **dgamma) {
    gc_tensor *x = gc_cast(x_values, dtype), *g = gc_cast(g_values, dtype);
    gc_tensor *gamma = affine ? gc_cast(gamma_values, dtype) : NULL, *beta = affine ? gc_cast(gamma_values, dtype) : NULL;
    REQUIRE(x && g && (!affine || (gamma && beta)));
    gc_set_requires_grad(x, true);
    if (affine) gc_set_requires_grad(gamma, true);
    gc_tensor *y = gc_layernorm(x, gamma, beta, EPS, NULL, NULL);
    REQUIRE(y && gc_backward(&y, &g, 1) == GC_OK);
    *dx = gc_cast(gc_grad(x), GC_F32);
    *dgamma = affine ? gc_cast(gc_grad(gamma), GC_F32) : NULL;
    gc_tensor *y_f32 = gc_cast(y, GC_F32);
    release_all((gc_tensor *[]){x, g, gamma, beta, y}, 5);
    return y_f32;
}

/* How many elements of a and b (one shape) differ at all. */
static int64_t differing_elements(const gc_tensor *a, const gc_tensor *b) {
    int64_t n = gc_numel(a), differ = 0;
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    REQUIRE(x && y);
    gc_to_host_f64(a, x);
    gc_to_host_f64(b, y);
    for (int64_t i = 0; i < n; i++) differ += x[i] != y[i];
    free(x);
    free(y);
    return differ;
}

/* Under GC_COMPOSED_OPS=1 the backward is the composition CUDA runs, in float: dx then
 * differs from the f64 bits somewhere (which also shows that the switch works). */
static void test_f32_kernel_matches_f64(void) {
    const int64_t shapes[][2] = {{1, 3}, {1, 256}, {1, 1030}, {3, 600}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int affine = 0; affine <= 1; affine++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            gc_tensor *x = gc_test_random_in(GC_SHAPE(rows, cols), GC_F32, 3, 7, 10 + s);
            gc_tensor *g = gc_test_random(GC_SHAPE(rows, cols), GC_F32, 20 + s);
            gc_tensor *gamma = gc_test_random_in(GC_SHAPE(cols), GC_F32, 0.5, 1.5, 30 + s);
            gc_tensor *dx32, *dgamma32, *dx64, *dgamma64;
            gc_tensor *y32 = layernorm_and_backward(x, gamma, g, affine, GC_F32, &dx32, &dgamma32);
            gc_tensor *y64 = layernorm_and_backward(x, gamma, g, affine, GC_F64, &dx64, &dgamma64);
            char what[96];
            snprintf(what, sizeof what, "f32 layernorm [%lld, %lld]%s: y", (long long)rows, (long long)cols,
                     affine ? " with gamma, beta" : "");
            gc_test_expect_close(y64, y32, 0, 0, what);
            snprintf(what, sizeof what, "f32 layernorm [%lld, %lld]%s: dx", (long long)rows, (long long)cols,
                     affine ? " with gamma, beta" : "");
            if (gc_test_composed_ops()) /* the composition's float roundings: not the fused bits */
                CHECK_MSG(differing_elements(dx64, dx32) > 0, "%s: the fused kernel ran under GC_COMPOSED_OPS", what);
            else gc_test_expect_close(dx64, dx32, 0, 0, what);
            if (affine && rows == 1 && !gc_test_composed_ops())
                gc_test_expect_close(dgamma64, dgamma32, 0, 0, "f32 layernorm: dgamma");
            release_all((gc_tensor *[]){x, g, gamma, y32, y64, dx32, dx64, dgamma32, dgamma64}, 9);
        }
}

/* --- errors ------------------------------------------------------------------------------ */

typedef struct layernorm_call {
    gc_tensor *x, *gamma, *beta;
    double eps;
} layernorm_call;

static void call_layernorm(void *arg) {
    layernorm_call *call = arg;
    gc_layernorm(call->x, call->gamma, call->beta, call->eps, NULL, NULL);
}

static void expect_layernorm_fatal(gc_tensor *x, gc_tensor *gamma, gc_tensor *beta, double eps, const char *message) {
    layernorm_call call = {x, gamma, beta, eps};
    gc_test_expect_fatal(call_layernorm, &call, message);
}

static void test_fatal_errors(void) {
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu()), *short_gamma = gc_ones(GC_SHAPE(3), GC_F32, gc_cpu());
    gc_tensor *wide_beta = gc_zeros(GC_SHAPE(1, 4), GC_F32, gc_cpu()), *f64_gamma = gc_ones(GC_SHAPE(4), GC_F64, gc_cpu());
    gc_tensor *ints = gc_zeros(GC_SHAPE(2, 4), GC_I32, gc_cpu()), *scalar = gc_scalar(1, GC_F32, gc_cpu());
    gc_tensor *no_cols = gc_zeros(GC_SHAPE(2, 0), GC_F32, gc_cpu());
    REQUIRE(x && short_gamma && wide_beta && f64_gamma && ints && scalar && no_cols);
    expect_layernorm_fatal(x, short_gamma, NULL, EPS, "layernorm: gamma is [3] f32 cpu but x is [2, 4] f32 cpu, so it must be [4]");
    expect_layernorm_fatal(x, NULL, wide_beta, EPS, "layernorm: beta is [1, 4] f32 cpu but x is [2, 4] f32 cpu, so it must be [4]");
    expect_layernorm_fatal(x, f64_gamma, NULL, EPS, "layernorm: inputs of different dtypes: [2, 4] f32 cpu and [4] f64 cpu");
    expect_layernorm_fatal(x, NULL, NULL, 0.0, "layernorm: eps must be > 0, got 0");
    expect_layernorm_fatal(x, NULL, NULL, -1e-5, "layernorm: eps must be > 0, got -1e-05");
    expect_layernorm_fatal(x, NULL, NULL, NAN, "layernorm: eps must be > 0, got nan");
    expect_layernorm_fatal(ints, NULL, NULL, EPS, "layernorm: needs a floating-point tensor, got [2, 4] i32 cpu");
    expect_layernorm_fatal(scalar, NULL, NULL, EPS, "layernorm: needs at least 1 dim(s), got [] f32 cpu");
    expect_layernorm_fatal(no_cols, NULL, NULL, EPS, "layernorm: [2, 0] f32 cpu has an empty last dim");
    release_all((gc_tensor *[]){x, short_gamma, wide_beta, f64_gamma, ints, scalar, no_cols}, 7);
}

/* --- error chaining and allocation failures ----------------------------------------------- */

static void test_null_chaining(void) {
    gc_tensor *mean = (gc_tensor *)&mean, *rstd = (gc_tensor *)&rstd; /* must be overwritten */
    CHECK(gc_layernorm(NULL, NULL, NULL, EPS, &mean, &rstd) == NULL);
    CHECK(mean == NULL && rstd == NULL);
}

/* With room for y and the mean but not for rstd: NULL, nothing left allocated, the
 * error recorded. */
static void test_allocation_failure(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 4), (const double[]){1, 2, 3, 4, 5, 6, 7, 9});
    size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_memory_set_limit(gc_cpu(), live + (8 + 2) * sizeof(float)); /* y [2, 4] and mean [2] */
    gc_clear_error();
    gc_tensor *mean = (gc_tensor *)&mean, *rstd = (gc_tensor *)&rstd;
    gc_tensor *y = gc_layernorm(x, NULL, NULL, EPS, &mean, &rstd);
    gc_memory_set_limit(gc_cpu(), 0);
    CHECK(y == NULL && mean == NULL && rstd == NULL);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == live);
    gc_tensor_release(x);
}

/* Every instruction set's f32 rows give the portable build's bits, forward (y, mean, rstd)
 * and backward (dx, g_xhat), with and without gamma and beta, at rows of 1 to 300 (odd
 * lengths leave a vector's tail; 300 is more than one chunk of the sums) whose mean is large
 * against their spread. */
static void test_row_variants(void) {
    enum { MAX_COLS = 300 };
    const size_t columns[] = {1, 3, 13, 64, 67, MAX_COLS};
    static float x[MAX_COLS], gamma[MAX_COLS], beta[MAX_COLS], g[MAX_COLS];
    static float want[3][MAX_COLS], got[3][MAX_COLS];
    uint64_t state = 777;
    for (size_t c = 0; c < sizeof columns / sizeof *columns; c++) {
        size_t cols = columns[c];
        for (size_t j = 0; j < cols; j++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            double u = (double)(state >> 40) / (double)(1u << 24); /* [0, 1) */
            x[j] = (float)(100.0 + 4.0 * u), g[j] = (float)(1.0 - 2.0 * u);
            gamma[j] = (float)(0.5 + u), beta[j] = (float)(u - 0.25);
        }
        for (int params = 0; params < 2; params++) {
            const float *gm = params ? gamma : NULL, *bt = params ? beta : NULL;
            double want_stats[2], got_stats[2];
            gc_cpu_layernorm_row_f32_on(GC_ISA_PORTABLE, x, gm, bt, want[0], cols, EPS, &want_stats[0],
                                        &want_stats[1]);
            gc_cpu_layernorm_grad_row_f32_on(GC_ISA_PORTABLE, x, gm, g, want[1], want[2], cols, EPS);
            for (gc_cpu_isa isa = GC_ISA_PORTABLE + 1; isa < GC_ISA_COUNT; isa++) {
                if (!gc_cpu_isa_available(isa)) continue;
                gc_cpu_layernorm_row_f32_on(isa, x, gm, bt, got[0], cols, EPS, &got_stats[0], &got_stats[1]);
                gc_cpu_layernorm_grad_row_f32_on(isa, x, gm, g, got[1], got[2], cols, EPS);
                for (int k = 0; k < 3; k++)
                    CHECK_MSG(memcmp(want[k], got[k], cols * sizeof(float)) == 0,
                              "isa %d, %zu columns, params %d, output %d", (int)isa, cols, params, k);
                CHECK(memcmp(want_stats, got_stats, sizeof got_stats) == 0);
            }
        }
    }
}

int main(void) {
    test_hand_values();
    test_gamma_beta();
    test_eps();
    test_3d();
    test_f64_large_mean();
    test_half_types();
    test_long_row();
    test_f32_kernel_matches_f64();
    test_fatal_errors();
    test_null_chaining();
    test_allocation_failure();
    test_row_variants();
    return gc_test_result();
}
