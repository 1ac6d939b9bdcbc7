/* gc_matmul on the CPU: hand-computed products in every float dtype and transpose
 * combination, odd shapes crossing every block boundary of the blocked kernel against
 * a naive double loop, f16/bf16 rounding, empty dims, alpha/beta through the kernel,
 * thread-count independence, and the errors. Inputs are built from host values (the
 * random ops are tested on their own). */
#include "check.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/op_internal.h"

static const gc_dtype float_dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16};
#define N_FLOAT_DTYPES 4

/* The unit roundoff of the accumulation (f16 and bf16 accumulate in f32). */
static double accumulation_roundoff(gc_dtype dtype) { return dtype == GC_F64 ? 0x1p-53 : 0x1p-24; }

/* The most that storing `value` into the dtype can move it: nothing for f32 and f64,
 * which store their accumulator as it is; half an ulp for f16 (whose subnormals below
 * 2^-14 are 2^-24 apart) and bf16. */
static double store_error(gc_dtype dtype, double value) {
    switch (dtype) {
    case GC_F16: return 0x1p-11 * fabs(value) + 0x1p-25;
    case GC_BF16: return 0x1p-8 * fabs(value);
    default: return 0;
    }
}

/* value rounded to what `dtype` holds. */
static double representable(double value, gc_dtype dtype) {
    switch (dtype) {
    case GC_F32: return (float)value;
    case GC_F16: return gc_f16_to_f32(gc_f32_to_f16((float)value));
    case GC_BF16: return gc_bf16_to_f32(gc_f32_to_bf16((float)value));
    default: return value;
    }
}

/* n values in [-1, 1) on a 2^-23 grid (so exact in f32), rounded to `dtype`. */
static void fill_random(double *values, int64_t n, uint64_t seed, gc_dtype dtype) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        values[i] = representable((double)(seed >> 40) * 0x1p-23 - 1.0, dtype);
    }
}

/* A CPU tensor of `dtype` holding `values`, converted by the CPU cast kernel. */
static gc_tensor *tensor_of(const double *values, int ndim, const int64_t *shape, gc_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    void *host = malloc((size_t)(n ? n : 1) * gc_dtype_size(dtype));
    REQUIRE(host);
    gc_cpu_cast(values, GC_F64, host, dtype, (size_t)n);
    gc_tensor *t = gc_from_host(host, ndim, shape, dtype, gc_cpu());
    free(host);
    REQUIRE(t);
    return t;
}

/* `batch` matrices [rows, cols] of `values` (batch 0: one 2-D matrix) stored as they
 * are or, when `transposed`, each as its transpose [cols, rows]. */
static gc_tensor *matrix(const double *values, int64_t batch, int64_t rows, int64_t cols, bool transposed,
                         gc_dtype dtype) {
    int64_t count = batch ? batch : 1, size = rows * cols;
    double *stored = malloc(sizeof(double) * (size_t)(count * size + 1));
    REQUIRE(stored);
    for (int64_t b = 0; b < count; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                stored[b * size + (transposed ? c * rows + r : r * cols + c)] =
                    values[b * size + r * cols + c];
    int64_t shape[3] = {batch, transposed ? cols : rows, transposed ? rows : cols};
    gc_tensor *t = batch ? tensor_of(stored, 3, shape, dtype) : tensor_of(stored, 2, shape + 1, dtype);
    free(stored);
    return t;
}

/* --- hand-computed ------------------------------------------------------------------ */

static const double A23[] = {1, 2, 3, 4, 5, 6};    /* [2, 3] */
static const double B32[] = {7, 8, 9, 10, 11, 12}; /* [3, 2] */
static const double C22[] = {58, 64, 139, 154};    /* A23 @ B32 */

/* Small integers: exact in every dtype, and so are the f32 sums, so no tolerance. */
static void test_hand_computed(void) {
    int64_t shape[2] = {2, 2};
    gc_tensor *want = tensor_of(C22, 2, shape, GC_F64);
    for (int d = 0; d < N_FLOAT_DTYPES; d++)
        for (int flags = 0; flags < 4; flags++) {
            bool ta = flags & 1, tb = flags & 2;
            gc_tensor *a = matrix(A23, 0, 2, 3, ta, float_dtypes[d]);
            gc_tensor *b = matrix(B32, 0, 3, 2, tb, float_dtypes[d]);
            gc_tensor *c = gc_matmul(a, b, ta, tb);
            REQUIRE(c);
            char what[96];
            snprintf(what, sizeof what, "2x3 @ 3x2 %s trans_a=%d trans_b=%d", gc_dtype_name(float_dtypes[d]),
                     ta, tb);
            CHECK(c->dtype == float_dtypes[d]);
            gc_test_expect_close(want, c, 0, 0, what);
            gc_tensor_release(a);
            gc_tensor_release(b);
            gc_tensor_release(c);
        }
    gc_tensor_release(want);
}

/* Two batches with different products, so that a wrong batch offset shows. */
static void test_batched(void) {
    const double a[] = {1, 2, 3, 4, 5, 6, /**/ 1, 0, -1, 0, 2, 0};   /* [2, 2, 3] */
    const double b[] = {7, 8, 9, 10, 11, 12, /**/ 1, 2, 3, 4, 5, 6}; /* [2, 3, 2] */
    const double c[] = {58, 64, 139, 154, /**/ -4, -4, 6, 8};        /* [2, 2, 2] */
    int64_t shape[3] = {2, 2, 2};
    gc_tensor *want = tensor_of(c, 3, shape, GC_F64);
    for (int flags = 0; flags < 4; flags++) {
        bool ta = flags & 1, tb = flags & 2;
        gc_tensor *left = matrix(a, 2, 2, 3, ta, GC_F32), *right = matrix(b, 2, 3, 2, tb, GC_F32);
        gc_tensor *got = gc_matmul(left, right, ta, tb);
        REQUIRE(got);
        CHECK(got->ndim == 3);
        char what[64];
        snprintf(what, sizeof what, "batched trans_a=%d trans_b=%d", ta, tb);
        gc_test_expect_close(want, got, 0, 0, what);
        gc_tensor_release(left);
        gc_tensor_release(right);
        gc_tensor_release(got);
    }
    gc_tensor_release(want);
}

/* Rounding to the dtype after every addition would lose the small addends: in f16,
 * 2048 + 1 is a tie and rounds (to even) back to 2048, twice. Summed in f32 and rounded
 * once, 2048 + 1 + 1 = 2050, which f16 holds. bf16 likewise at 256. */
static void test_half_rounds_once(void) {
    const int64_t a_shape[2] = {1, 3}, b_shape[2] = {3, 1};
    const double ones[] = {1, 1, 1};
    const struct {
        gc_dtype dtype;
        double big;
    } cases[] = {{GC_F16, 2048}, {GC_BF16, 256}};
    for (int i = 0; i < 2; i++) {
        const double a_values[] = {cases[i].big, 1, 1};
        gc_tensor *a = tensor_of(a_values, 2, a_shape, cases[i].dtype);
        gc_tensor *b = tensor_of(ones, 2, b_shape, cases[i].dtype);
        gc_tensor *c = gc_matmul(a, b, false, false);
        REQUIRE(c);
        CHECK_MSG(gc_item(c) == cases[i].big + 2, "%s: got %g", gc_dtype_name(cases[i].dtype), gc_item(c));
        gc_tensor_release(a);
        gc_tensor_release(b);
        gc_tensor_release(c);
    }
}

/* --- against a naive double loop ------------------------------------------------------ */

/* op(a) [m, k] @ op(b) [k, n] for `batch` random pairs (batch 0: 2-D), against a double
 * loop over the same (already rounded) values; with_bias (2-D only): gc_matmul_bias, a
 * random bias [n] added to each row. Each of the two sums of k products (k + 1 terms with
 * the bias) is within (k + 3) u sum_p |terms| of the exact value (Higham's bound for
 * recursive summation, whatever the order, plus the product roundings), u being the unit
 * roundoff of its accumulation; f16 and bf16 then round once more, by at most their own u. */
static void check_against_loop(gc_dtype dtype, int64_t batch, int64_t m, int64_t k, int64_t n, bool ta,
                               bool tb, bool with_bias, uint64_t seed) {
    int64_t count = batch ? batch : 1;
    double *a = malloc(sizeof(double) * (size_t)(count * m * k + 1));
    double *b = malloc(sizeof(double) * (size_t)(count * k * n + 1));
    double *bias = calloc((size_t)n + 1, sizeof(double));
    double *got = malloc(sizeof(double) * (size_t)(count * m * n + 1));
    REQUIRE(a && b && bias && got);
    fill_random(a, count * m * k, seed, dtype);
    fill_random(b, count * k * n, seed + 1, dtype);
    if (with_bias) fill_random(bias, n, seed + 2, dtype);
    gc_tensor *left = matrix(a, batch, m, k, ta, dtype), *right = matrix(b, batch, k, n, tb, dtype);
    gc_tensor *bias_tensor = with_bias ? tensor_of(bias, GC_SHAPE(n), dtype) : NULL;
    gc_tensor *c = with_bias ? gc_matmul_bias(left, right, bias_tensor, ta, tb) : gc_matmul(left, right, ta, tb);
    REQUIRE(c);
    gc_to_host_f64(c, got);

    double roundoff = (double)(k + 3) * (accumulation_roundoff(dtype) + 0x1p-53);
    int bad = 0;
    for (int64_t t = 0; t < count; t++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double want = bias[j], magnitude = fabs(bias[j]);
                for (int64_t p = 0; p < k; p++) {
                    double product = a[(t * m + i) * k + p] * b[(t * k + p) * n + j];
                    want += product;
                    magnitude += fabs(product);
                }
                double error = fabs(got[(t * m + i) * n + j] - want);
                double bound = roundoff * magnitude + store_error(dtype, fabs(want) + roundoff * magnitude);
                if (error > bound && bad++ < 3)
                    fprintf(
                        stderr,
                        "%s batch %lld [%lld x %lld @ %lld] ta=%d tb=%d bias=%d: c[%lld, %lld] = %.17g, want %.17g\n",
                        gc_dtype_name(dtype), (long long)batch, (long long)m, (long long)k, (long long)n, ta,
                        tb, with_bias, (long long)i, (long long)j, got[(t * m + i) * n + j], want);
            }
    CHECK(bad == 0);
    free(a);
    free(b);
    free(bias);
    free(got);
    gc_tensor_release(left);
    gc_tensor_release(right);
    gc_tensor_release(bias_tensor);
    gc_tensor_release(c);
}

/* Shapes that leave partial micro-tiles (m % 4, n % 16) and cross KC = 256 (k = 517),
 * MC = 96 (m = 101) and NC = 3072 (n = 3100) of the blocked kernel; the 2-D ones with a
 * bias too. */
static void test_against_loop(void) {
    const int64_t shapes[][4] = {/* batch, m, k, n */
                                 {0, 67, 131, 45},
                                 {0, 101, 517, 35},
                                 {0, 5, 7, 3100},
                                 {0, 1, 1, 1},
                                 {3, 33, 65, 17}};
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < N_FLOAT_DTYPES; d++)
            for (int flags = 0; flags < 4; flags++)
                for (int with_bias = 0; with_bias <= (shapes[s][0] == 0); with_bias++)
                    check_against_loop(float_dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                                       flags & 1, flags & 2, with_bias, seed += 3);
}

/* On the CPU gc_matmul_bias hands the bias row to the GEMM, which reads it where c's first
 * depth block is added instead of a c that holds it broadcast: bit for bit the old way, c
 * filled with the rows and the product accumulated into it (gc_matmul_into), for every
 * dtype (16-bit and BLAS products copy the row into c themselves), a weight's packed
 * panels or not, edge tiles, several depth blocks (k = 517) and k = 0. */
static void test_bias_row_is_broadcast_then_accumulate(void) {
    const int64_t shapes[][3] = {{67, 517, 45}, {13, 384, 40}, {7, 0, 19}, {1, 30, 16}};
    uint64_t seed = 500;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < N_FLOAT_DTYPES; d++)
            for (int weight = 0; weight < 2; weight++) {
                int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
                gc_dtype dtype = float_dtypes[d];
                double *a = malloc(sizeof(double) * (size_t)(m * k + 1)), *b = malloc(sizeof(double) * (size_t)(k * n + 1));
                double *bias = malloc(sizeof(double) * (size_t)n), *rows = malloc(sizeof(double) * (size_t)(m * n));
                REQUIRE(a && b && bias && rows);
                fill_random(a, m * k, seed += 3, dtype);
                fill_random(b, k * n, seed + 1, dtype);
                fill_random(bias, n, seed + 2, dtype);
                for (int64_t i = 0; i < m * n; i++) rows[i] = bias[i % n];
                gc_tensor *left = matrix(a, 0, m, k, false, dtype), *right = matrix(b, 0, k, n, true, dtype);
                gc_tensor *bias_tensor = tensor_of(bias, GC_SHAPE(n), dtype), *old = tensor_of(rows, GC_SHAPE(m, n), dtype);
                if (weight) gc_tensor_set_weight(right);
                gc_tensor *got = gc_matmul_bias(left, right, bias_tensor, false, true);
                REQUIRE(got);
                gc_matmul_into(old, left, right, false, true, true);
                CHECK_MSG(memcmp(gc_data(got), gc_data(old), gc_nbytes(old)) == 0,
                          "%s [%lld x %lld @ %lld]%s: the bias row in the GEMM differs from the bias broadcast",
                          gc_dtype_name(dtype), (long long)m, (long long)k, (long long)n, weight ? " (weight)" : "");
                RELEASE(left, right, bias_tensor, old, got);
                free(a);
                free(b);
                free(bias);
                free(rows);
            }
}

/* f16 and bf16 are the f32 product of the widened inputs, rounded once: bit for bit. */
static void test_half_is_rounded_f32(void) {
    const int64_t m = 67, k = 131, n = 45;
    double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * k * n);
    REQUIRE(a && b);
    const gc_dtype halves[] = {GC_F16, GC_BF16};
    for (int h = 0; h < 2; h++) {
        fill_random(a, m * k, 11, halves[h]);
        fill_random(b, k * n, 12, halves[h]);
        gc_tensor *a16 = matrix(a, 0, m, k, false, halves[h]), *b16 = matrix(b, 0, k, n, true, halves[h]);
        gc_tensor *a32 = matrix(a, 0, m, k, false, GC_F32), *b32 = matrix(b, 0, k, n, true, GC_F32);
        gc_tensor *c16 = gc_matmul(a16, b16, false, true), *c32 = gc_matmul(a32, b32, false, true);
        REQUIRE(c16 && c32);
        float *wide = malloc(sizeof(float) * m * n);
        uint16_t *narrow = malloc(sizeof(uint16_t) * m * n);
        REQUIRE(wide && narrow);
        gc_copy_to_host(c32, wide);
        gc_copy_to_host(c16, narrow);
        int bad = 0;
        for (int64_t i = 0; i < m * n; i++) {
            uint16_t want = halves[h] == GC_F16 ? gc_f32_to_f16(wide[i]) : gc_f32_to_bf16(wide[i]);
            bad += narrow[i] != want;
        }
        CHECK_MSG(bad == 0, "%s: %d elements differ from the rounded f32 product", gc_dtype_name(halves[h]),
                  bad);
        free(wide);
        free(narrow);
        gc_tensor_release(a16);
        gc_tensor_release(b16);
        gc_tensor_release(a32);
        gc_tensor_release(b32);
        gc_tensor_release(c16);
        gc_tensor_release(c32);
    }
    free(a);
    free(b);
}

/* --- empty dims ------------------------------------------------------------------------ */

static void expect_empty_product(int ndim, const int64_t *a_shape, const int64_t *b_shape, bool ta, bool tb,
                                 const int64_t *c_shape) {
    gc_tensor *a = gc_zeros(ndim, a_shape, GC_F32, gc_cpu()), *b = gc_zeros(ndim, b_shape, GC_F32, gc_cpu());
    REQUIRE(a && b);
    gc_tensor *c = gc_matmul(a, b, ta, tb);
    REQUIRE(c);
    gc_tensor *want = gc_zeros(ndim, c_shape, GC_F32, gc_cpu());
    REQUIRE(want);
    char what[64];
    gc_shape_str(ndim, c_shape, what, sizeof what);
    gc_test_expect_close(want, c, 0, 0, what); /* also checks the shape */
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(c);
    gc_tensor_release(want);
}

/* m or n = 0 gives an empty result; k = 0 an empty sum, zeros. */
static void test_empty(void) {
    expect_empty_product(2, (int64_t[]){0, 3}, (int64_t[]){3, 2}, false, false, (int64_t[]){0, 2});
    expect_empty_product(2, (int64_t[]){2, 3}, (int64_t[]){3, 0}, false, false, (int64_t[]){2, 0});
    expect_empty_product(2, (int64_t[]){2, 0}, (int64_t[]){0, 3}, false, false, (int64_t[]){2, 3});
    expect_empty_product(2, (int64_t[]){0, 2}, (int64_t[]){3, 0}, true, true, (int64_t[]){2, 3});
    expect_empty_product(3, (int64_t[]){2, 2, 0}, (int64_t[]){2, 0, 3}, false, false, (int64_t[]){2, 2, 3});
    expect_empty_product(3, (int64_t[]){0, 2, 3}, (int64_t[]){0, 3, 4}, false, false, (int64_t[]){0, 2, 4});
}

/* --- alpha and beta, through the kernel --------------------------------------------- */

/* c = alpha * a @ b + beta * c0 on the kernel directly (the op always uses 1 and 0). */
static void expect_kernel(gc_dtype dtype, const double *a_values, const double *b_values, const double *c0,
                          int64_t m, int64_t k, int64_t n, float alpha, float beta, const double *want_values,
                          const char *what) {
    gc_tensor *a = tensor_of(a_values, 2, (int64_t[]){m, k}, dtype);
    gc_tensor *b = tensor_of(b_values, 2, (int64_t[]){k, n}, dtype);
    gc_tensor *c = tensor_of(c0, 2, (int64_t[]){m, n}, dtype);
    gc_tensor *want = tensor_of(want_values, 2, (int64_t[]){m, n}, GC_F64);
    gc_matmul_args args = {.a = gc_data(a),
                           .b = gc_data(b),
                           .c = gc_data(c),
                           .dtype = dtype,
                           .batch = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .alpha = alpha,
                           .beta = beta};
    gc_cpu_matmul(&args);
    char text[96];
    snprintf(text, sizeof text, "%s %s", what, gc_dtype_name(dtype));
    gc_test_expect_close(want, c, 0, 0, text);
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(c);
    gc_tensor_release(want);
}

/* Every value below is exact in every float dtype (bf16 holds 8 significant bits). */
static void test_alpha_beta(void) {
    const double c0[] = {1, 2, 3, 4}, nans[] = {NAN, NAN, NAN, NAN};
    const double scaled[] = {0.5 * 58 + 2, 0.5 * 64 + 4, 0.5 * 139 + 6, 0.5 * 154 + 8};
    const double product[] = {29, 32, 69.5, 77}, doubled[] = {2, 4, 6, 8}, zeros[] = {0, 0, 0, 0};
    double ones[300], c_before = 4, c_after = 0.5 * 4 + 300;
    for (int i = 0; i < 300; i++) ones[i] = 1;
    for (int d = 0; d < N_FLOAT_DTYPES; d++) {
        gc_dtype dtype = float_dtypes[d];
        expect_kernel(dtype, A23, B32, c0, 2, 3, 2, 0.5f, 2.0f, scaled, "alpha 0.5, beta 2");
        /* beta = 0 must not read c: NaN * 0 would be NaN. */
        expect_kernel(dtype, A23, B32, nans, 2, 3, 2, 0.5f, 0.0f, product, "beta 0 over NaN");
        expect_kernel(dtype, A23, B32, c0, 2, 0, 2, 1.0f, 2.0f, doubled, "k = 0, beta 2");
        expect_kernel(dtype, A23, B32, nans, 2, 0, 2, 1.0f, 0.0f, zeros, "k = 0, beta 0 over NaN");
        /* k = 300 spans two KC blocks: beta must be applied once, not per block. */
        expect_kernel(dtype, ones, ones, &c_before, 1, 300, 1, 1.0f, 0.5f, &c_after, "k = 300, beta 0.5");
    }
}

/* --- threads ------------------------------------------------------------------------- */

static gc_tensor *product_with_threads(int threads, const gc_tensor *a, const gc_tensor *b) {
    gc_set_cpu_threads(threads);
    gc_tensor *c = gc_matmul(a, b, true, false);
    REQUIRE(c);
    return c;
}

/* Rows are split between threads, never the sum of one element: any thread count gives
 * the same bits. 161 x 160 x 200 is enough work for 3 threads and splits unevenly. */
static void test_thread_count_independence(void) {
    const int64_t m = 161, k = 160, n = 200;
    double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * k * n);
    REQUIRE(a && b);
    fill_random(a, m * k, 21, GC_F32);
    fill_random(b, k * n, 22, GC_F32);
    gc_tensor *ta = matrix(a, 0, m, k, true, GC_F32), *tb = matrix(b, 0, k, n, false, GC_F32);
    int threads = gc_cpu_threads();
    gc_tensor *one = product_with_threads(1, ta, tb), *three = product_with_threads(3, ta, tb);
    gc_test_expect_close(one, three, 0, 0, "1 thread vs 3 threads");
    gc_set_cpu_threads(threads);
    free(a);
    free(b);
    gc_tensor_release(ta);
    gc_tensor_release(tb);
    gc_tensor_release(one);
    gc_tensor_release(three);
}

/* --- errors ------------------------------------------------------------------------- */

typedef struct matmul_case {
    gc_tensor *a, *b;
    bool ta, tb;
} matmul_case;

static void run_matmul(void *arg) {
    const matmul_case *c = arg;
    gc_matmul(c->a, c->b, c->ta, c->tb);
}

static void expect_matmul_fatal(gc_tensor *a, gc_tensor *b, bool ta, bool tb, const char *expected) {
    matmul_case c = {a, b, ta, tb};
    gc_test_expect_fatal(run_matmul, &c, expected);
    gc_tensor_release(a);
    gc_tensor_release(b);
}

static gc_tensor *zeros(int ndim, const int64_t *shape, gc_dtype dtype) {
    gc_tensor *t = gc_zeros(ndim, shape, dtype, gc_cpu());
    REQUIRE(t);
    return t;
}

typedef struct bias_case {
    gc_tensor *a, *b, *bias;
} bias_case;

static void run_matmul_bias(void *arg) {
    const bias_case *c = arg;
    gc_matmul_bias(c->a, c->b, c->bias, false, false);
}

static void expect_bias_fatal(gc_tensor *a, gc_tensor *b, gc_tensor *bias, const char *expected) {
    bias_case c = {a, b, bias};
    gc_test_expect_fatal(run_matmul_bias, &c, expected);
    RELEASE(a, b, bias);
}

static void test_errors(void) {
    expect_matmul_fatal(zeros(GC_SHAPE(2, 3), GC_F32), zeros(GC_SHAPE(2, 2), GC_F32), false, false,
                        "matmul: inner dims differ: [2, 3] f32 cpu @ [2, 2] f32 cpu gives k = 3 and 2");
    expect_matmul_fatal(zeros(GC_SHAPE(3, 2), GC_F32), zeros(GC_SHAPE(2, 2), GC_F32), true, false,
                        "matmul: inner dims differ: [3, 2] f32 cpu (transposed) @ [2, 2] f32 cpu");
    expect_matmul_fatal(zeros(GC_SHAPE(2, 3), GC_F32), zeros(GC_SHAPE(2, 3), GC_F32), false, false,
                        "matmul: inner dims differ: [2, 3] f32 cpu @ [2, 3] f32 cpu");
    expect_matmul_fatal(zeros(GC_SHAPE(2, 3), GC_F32), zeros(GC_SHAPE(1, 3, 2), GC_F32), false, false,
                        "matmul: needs two 2-D tensors or two 3-D tensors with one batch size, got [2, 3] "
                        "f32 cpu and [1, 3, 2] f32 cpu");
    expect_matmul_fatal(zeros(GC_SHAPE(2, 2, 3), GC_F32), zeros(GC_SHAPE(3, 3, 2), GC_F32), false, false,
                        "got [2, 2, 3] f32 cpu and [3, 3, 2] f32 cpu");
    expect_matmul_fatal(zeros(GC_SHAPE(3), GC_F32), zeros(GC_SHAPE(3), GC_F32), false, false,
                        "got [3] f32 cpu and [3] f32 cpu");
    expect_matmul_fatal(zeros(GC_SHAPE(2, 3), GC_I32), zeros(GC_SHAPE(3, 2), GC_I32), false, false,
                        "matmul: needs a floating-point tensor, got [2, 3] i32 cpu");
    expect_matmul_fatal(zeros(GC_SHAPE(2, 3), GC_F32), zeros(GC_SHAPE(3, 2), GC_F64), false, false,
                        "matmul: inputs of different dtypes: [2, 3] f32 cpu and [3, 2] f64 cpu");
    expect_bias_fatal(zeros(GC_SHAPE(2, 3), GC_F32), zeros(GC_SHAPE(3, 4), GC_F32), zeros(GC_SHAPE(3), GC_F32),
                      "matmul_bias: needs 2-D operands and a bias [4], got a [2, 3] f32 cpu and bias [3] f32 cpu");
    expect_bias_fatal(zeros(GC_SHAPE(1, 2, 3), GC_F32), zeros(GC_SHAPE(1, 3, 4), GC_F32), zeros(GC_SHAPE(4), GC_F32),
                      "matmul_bias: needs 2-D operands and a bias [4], got a [1, 2, 3] f32 cpu");
    expect_bias_fatal(zeros(GC_SHAPE(2, 3), GC_F32), zeros(GC_SHAPE(3, 4), GC_F32), zeros(GC_SHAPE(4), GC_F64),
                      "matmul_bias: inputs of different dtypes: [2, 3] f32 cpu and [4] f64 cpu");
    /* Two devices cannot meet on a CPU-only machine; tests/test_matmul_cuda.c covers it. */
    /* A malformed GC_NUM_THREADS: tests/test_threads.c. */
}

/* A NULL input (an earlier failure) gives NULL and leaves the recorded error alone; a
 * failed allocation gives NULL with the allocator's status. */
static void test_null_and_allocation_failure(void) {
    gc_tensor *a = zeros(GC_SHAPE(64, 64), GC_F32), *b = zeros(GC_SHAPE(64, 64), GC_F32);
    gc_clear_error();
    CHECK(gc_matmul(NULL, b, false, false) == NULL);
    CHECK(gc_matmul(a, NULL, false, false) == NULL);
    CHECK(gc_last_status() == GC_OK);

    gc_memory_set_limit(gc_cpu(), gc_memory_get_stats(gc_cpu()).live_bytes + 1024);
    gc_tensor *c = gc_matmul(a, b, false, false); /* needs 16 KiB */
    CHECK(c == NULL);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    gc_memory_set_limit(gc_cpu(), 0);
    gc_clear_error();
    gc_tensor_release(c);

    /* gc_matmul_bias: NULL in, NULL out; no room for c: NULL, nothing kept, the limit's
     * status (on the CPU c is all it allocates: the GEMM reads the bias row itself) */
    gc_tensor *bias = zeros(GC_SHAPE(64), GC_F32);
    CHECK(gc_matmul_bias(a, b, NULL, false, false) == NULL && gc_last_status() == GC_OK);
    size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_memory_set_limit(gc_cpu(), live + 64 * 64 * sizeof(float) - 1);
    CHECK(gc_matmul_bias(a, b, bias, false, false) == NULL);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == live);
    gc_memory_set_limit(gc_cpu(), 0);
    gc_clear_error();
    RELEASE(a, b, bias);
}

int main(void) {
    test_hand_computed();
    test_batched();
    test_half_rounds_once();
    test_against_loop();
    test_half_is_rounded_f32();
    test_bias_row_is_broadcast_then_accumulate();
    test_empty();
    test_alpha_beta();
    test_thread_count_independence();
    test_errors();
    test_null_and_allocation_failure();
    return gc_test_result();
}
