/* Backward rules on f16 and bf16 inputs compute in f32 and round each result once: the
 * gradients of softmax, log-softmax, layernorm (x, gamma, beta) and the embedding's
 * scatter-add, against the rules written out in double on the same 16-bit values.
 *
 * Tolerance, per element: u |want| + s + 2^-20 max|want over the row|, u = 2^-11 (f16) or
 * 2^-8 (bf16), the unit roundoff of the one final rounding, and s half the spacing of the
 * dtype's subnormals (2^-25 for f16, where softmax gradients of 1e-6 live); the last term covers the f32
 * arithmetic before it (rows of at most 300 terms: 300 x 2^-24 < 2^-15 of the row's scale at
 * worst, usually far less), and is 2^9 times smaller than one 16-bit rounding of an
 * intermediate at that scale, so a rule that rounded its sums to 16 bits would fail. */
#include "check.h"
#include "values.h"

#define ROWS 4
#define COLS 300

static double unit_roundoff(gc_dtype dtype) { return dtype == GC_F16 ? ldexp(1, -11) : ldexp(1, -8); }
static double half_subnormal(gc_dtype dtype) { return dtype == GC_F16 ? ldexp(1, -25) : ldexp(1, -134); }

/* A [rows, cols] tensor of `dtype` with uniform values in [lo, hi), and those values in double. */
static gc_tensor *random_values(int64_t rows, int64_t cols, gc_dtype dtype, double lo, double hi, uint64_t seed,
                                double *values) {
    gc_tensor *t = gc_test_random_in(GC_SHAPE(rows, cols), dtype, lo, hi, seed);
    gc_to_host_f64(t, values);
    return t;
}

/* got (any dtype) against want [rows, cols] with the tolerance above, row by row. */
static void expect_rows(const gc_tensor *got, const double *want, int64_t rows, int64_t cols, gc_dtype dtype,
                        const char *what) {
    double *values = malloc((size_t)(rows * cols) * sizeof *values);
    REQUIRE(got && values);
    CHECK_MSG(got->dtype == dtype, "%s: gradient dtype %s", what, gc_dtype_name(got->dtype));
    gc_to_host_f64(got, values);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        double scale = 0;
        for (int64_t c = 0; c < cols; c++) scale = fmax(scale, fabs(want[r * cols + c]));
        for (int64_t c = 0; c < cols; c++) {
            double w = want[r * cols + c], g = values[r * cols + c];
            double tolerance = unit_roundoff(dtype) * fabs(w) + half_subnormal(dtype) + ldexp(scale, -20);
            if (fabs(g - w) > tolerance && bad++ < 3)
                fprintf(stderr, "%s %s: [%lld, %lld] got %.9g, want %.9g\n", what, gc_dtype_name(dtype),
                        (long long)r, (long long)c, g, w);
        }
    }
    CHECK_MSG(bad == 0, "%s %s: %d elements off", what, gc_dtype_name(dtype), bad);
    free(values);
}

/* The gradient of x for y = softmax(x) (or log-softmax) seeded with g. */
static void test_softmax(gc_dtype dtype, bool log_variant) {
    double x_values[ROWS * COLS], g_values[ROWS * COLS], y[ROWS * COLS], want[ROWS * COLS];
    gc_tensor *x = random_values(ROWS, COLS, dtype, -3, 3, 1, x_values);
    gc_tensor *g = random_values(ROWS, COLS, dtype, -1, 1, 2, g_values);
    gc_set_requires_grad(x, true);
    gc_tensor *out = log_variant ? gc_log_softmax(x) : gc_softmax(x);
    REQUIRE(out && gc_backward(&out, &g, 1) == GC_OK);
    gc_to_host_f64(out, y); /* the rule works from the saved, rounded output, as this does */
    for (int r = 0; r < ROWS; r++) {
        double total = 0;
        for (int c = 0; c < COLS; c++)
            total += log_variant ? g_values[r * COLS + c] : g_values[r * COLS + c] * y[r * COLS + c];
        for (int c = 0; c < COLS; c++) {
            int i = r * COLS + c;
            want[i] = log_variant ? g_values[i] - exp(y[i]) * total : y[i] * (g_values[i] - total);
        }
    }
    expect_rows(gc_grad(x), want, ROWS, COLS, dtype, log_variant ? "log-softmax dx" : "softmax dx");
    RELEASE(x, g, out);
}

/* The gradients of x, gamma and beta, with rows whose mean is large against their spread
 * (the statistics' own precision matters there). */
static void test_layernorm(gc_dtype dtype) {
    const double eps = 1e-5;
    double x_values[ROWS * COLS], g_values[ROWS * COLS], gamma_values[COLS], beta_values[COLS];
    gc_tensor *x = random_values(ROWS, COLS, dtype, 6, 10, 3, x_values);
    gc_tensor *g = random_values(ROWS, COLS, dtype, -1, 1, 4, g_values);
    gc_tensor *gamma = random_values(1, COLS, dtype, 0.5, 1.5, 5, gamma_values);
    gc_tensor *beta = random_values(1, COLS, dtype, -1, 1, 6, beta_values);
    gc_tensor *gamma_flat = gc_reshape(gamma, GC_SHAPE(COLS)), *beta_flat = gc_reshape(beta, GC_SHAPE(COLS));
    gc_tensor *leaves[3] = {x, gamma_flat, beta_flat};
    for (int i = 0; i < 3; i++) gc_set_requires_grad(leaves[i], true);
    gc_tensor *y = gc_layernorm(x, gamma_flat, beta_flat, eps, NULL, NULL);
    REQUIRE(y && gc_backward(&y, &g, 1) == GC_OK);
    double dx[ROWS * COLS], dgamma[COLS] = {0}, dbeta[COLS] = {0};
    for (int r = 0; r < ROWS; r++) {
        const double *xr = x_values + r * COLS, *gr = g_values + r * COLS;
        double mean = 0, variance = 0, xhat[COLS], mean_dxhat = 0, mean_dxhat_xhat = 0;
        for (int c = 0; c < COLS; c++) mean += xr[c] / COLS;
        for (int c = 0; c < COLS; c++) variance += (xr[c] - mean) * (xr[c] - mean) / COLS;
        double rstd = 1 / sqrt(variance + eps);
        for (int c = 0; c < COLS; c++) {
            xhat[c] = (xr[c] - mean) * rstd;
            mean_dxhat += gr[c] * gamma_values[c] / COLS;
            mean_dxhat_xhat += gr[c] * gamma_values[c] * xhat[c] / COLS;
            dgamma[c] += gr[c] * xhat[c];
            dbeta[c] += gr[c];
        }
        for (int c = 0; c < COLS; c++)
            dx[r * COLS + c] = rstd * (gr[c] * gamma_values[c] - mean_dxhat - xhat[c] * mean_dxhat_xhat);
    }
    expect_rows(gc_grad(x), dx, ROWS, COLS, dtype, "layernorm dx");
    expect_rows(gc_grad(gamma_flat), dgamma, 1, COLS, dtype, "layernorm dgamma");
    expect_rows(gc_grad(beta_flat), dbeta, 1, COLS, dtype, "layernorm dbeta");
    RELEASE(x, g, gamma, beta, gamma_flat, beta_flat, y);
}

/* The table's gradient when one id comes 4096 times: a 16-bit running sum would stall once
 * it passes 2048 (f16's spacing there is 2: adding values below 1 rounds back). */
static void test_embedding(gc_dtype dtype) {
    enum { n_ids = 4096, vocab = 3, dim = 4 };
    int32_t ids[n_ids];
    for (int i = 0; i < n_ids; i++) ids[i] = i % 5 == 0 ? 2 : 0; /* id 1 never comes */
    double g_values[n_ids * dim], want[vocab * dim] = {0};
    gc_tensor *table = gc_zeros(GC_SHAPE(vocab, dim), dtype, gc_cpu());
    gc_tensor *id_tensor = gc_from_host(ids, GC_SHAPE(n_ids), GC_I32, gc_cpu());
    gc_tensor *g = random_values(n_ids, dim, dtype, 0.25, 1, 7, g_values);
    gc_set_requires_grad(table, true);
    gc_tensor *rows = gc_embedding(table, id_tensor);
    REQUIRE(rows && gc_backward(&rows, &g, 1) == GC_OK);
    for (int i = 0; i < n_ids; i++)
        for (int j = 0; j < dim; j++) want[ids[i] * dim + j] += g_values[i * dim + j];
    expect_rows(gc_grad(table), want, 1, vocab * dim, dtype, "embedding dtable");
    RELEASE(table, id_tensor, g, rows);
}

int main(void) {
    const gc_dtype dtypes[2] = {GC_F16, GC_BF16};
    for (int d = 0; d < 2; d++) {
        test_softmax(dtypes[d], false);
        test_softmax(dtypes[d], true);
        test_layernorm(dtypes[d]);
        test_embedding(dtypes[d]);
    }
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
