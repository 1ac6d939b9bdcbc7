/* Reductions (sum, mean, max over the last dim and over everything), softmax and
 * log-softmax on the CPU, against hand-computed values. */
#include <stdint.h>

#include "check.h"
#include "values.h"

/* A result computed in double and rounded once to f32 is within half an f32 ulp of the
 * exact value: 2^-24 relative. Values that f32 holds exactly are compared for equality. */
#define F32_ROUNDING (1.0 / (1 << 24))
/* The same for f64 results, whose computations take a few roundings of 2^-53 each. */
#define F64_ROUNDING 1e-15

/* --- sum, mean, max over the last dim ---------------------------------------------- */

static void test_last_1d(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){1, -2, 3.5, 0.5});
    gc_tensor *sum = gc_sum_last(x, false), *sum_keep = gc_sum_last(x, true);
    gc_tensor *mean = gc_mean_last(x, false), *argmax = NULL;
    gc_tensor *max = gc_max_last(x, true, &argmax);
    gc_test_expect_values(sum, GC_F32, 0, NULL, (const double[]){3}, 0, 0, "sum_last 1-D");
    gc_test_expect_values(sum_keep, GC_F32, GC_SHAPE(1), (const double[]){3}, 0, 0, "sum_last 1-D keepdim");
    gc_test_expect_values(mean, GC_F32, 0, NULL, (const double[]){0.75}, 0, 0, "mean_last 1-D");
    gc_test_expect_values(max, GC_F32, GC_SHAPE(1), (const double[]){3.5}, 0, 0, "max_last 1-D keepdim");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(1), (const double[]){2}, 0, 0, "argmax 1-D keepdim");
    gc_tensor *all[] = {x, sum, sum_keep, mean, max, argmax};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

static void test_last_2d(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1, 2, 3, 4, -5, 6});
    gc_tensor *sum = gc_sum_last(x, false), *mean = gc_mean_last(x, true), *argmax = NULL;
    gc_tensor *max = gc_max_last(x, false, &argmax);
    gc_test_expect_values(sum, GC_F32, GC_SHAPE(2), (const double[]){6, 5}, 0, 0, "sum_last 2-D");
    gc_test_expect_values(mean, GC_F32, GC_SHAPE(2, 1), (const double[]){2, 5.0 / 3}, 0, F32_ROUNDING,
                          "mean_last 2-D keepdim");
    gc_test_expect_values(max, GC_F32, GC_SHAPE(2), (const double[]){3, 6}, 0, 0, "max_last 2-D");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(2), (const double[]){2, 2}, 0, 0, "argmax 2-D");
    gc_tensor *all[] = {x, sum, mean, max, argmax};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

static void test_last_3d(void) {
    gc_tensor *x = gc_test_tensor(GC_F64, GC_SHAPE(2, 2, 2), (const double[]){1, 2, 3, 4, 5, 6, 8, 7});
    gc_tensor *sum = gc_sum_last(x, true), *mean = gc_mean_last(x, false), *argmax = NULL;
    gc_tensor *max = gc_max_last(x, true, &argmax);
    gc_test_expect_values(sum, GC_F64, GC_SHAPE(2, 2, 1), (const double[]){3, 7, 11, 15}, 0, 0,
                          "sum_last 3-D keepdim");
    gc_test_expect_values(mean, GC_F64, GC_SHAPE(2, 2), (const double[]){1.5, 3.5, 5.5, 7.5}, 0, 0,
                          "mean_last 3-D");
    gc_test_expect_values(max, GC_F64, GC_SHAPE(2, 2, 1), (const double[]){2, 4, 6, 8}, 0, 0, "max_last 3-D");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(2, 2, 1), (const double[]){1, 1, 1, 0}, 0, 0,
                          "argmax 3-D keepdim");
    gc_tensor *all[] = {x, sum, mean, max, argmax};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

/* Ties go to the first index; a row of -inf has its max at 0; the first nan is the max. */
static void test_max_ties_inf_nan(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(5, 4), (const double[]){
        5, 7, 7, 1,
        2, 2, 2, 2,
        -INFINITY, -INFINITY, -INFINITY, -INFINITY,
        1, NAN, 3, NAN,
        -INFINITY, 0, INFINITY, INFINITY});
    gc_tensor *argmax = NULL, *max = gc_max_last(x, false, &argmax);
    gc_test_expect_values(max, GC_F32, GC_SHAPE(5), (const double[]){7, 2, -INFINITY, NAN, INFINITY}, 0, 0,
                          "max_last ties, -inf, nan");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(5), (const double[]){1, 0, 0, 1, 2}, 0, 0,
                          "argmax ties, -inf, nan");
    gc_tensor_release(max);
    gc_tensor_release(argmax);
    gc_tensor_release(x);
}

/* Rows longer than the CPU kernels' chunk of 256: indices and sums carry across chunks. */
static void test_long_rows(void) {
    enum { cols = 600 };
    double data[2 * cols];
    for (int j = 0; j < cols; j++) {
        data[j] = j % 100;                /* max 99 first at 99, again at 199, ... */
        data[cols + j] = j == 400 ? NAN : 1000 - j; /* max at 0, but the nan at 400 wins */
    }
    data[cols + 500] = 5000; /* after the nan: changes nothing */
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, cols), data);
    gc_tensor *argmax = NULL, *max = gc_max_last(x, false, &argmax), *sum = gc_sum_last(x, false);
    gc_test_expect_values(max, GC_F32, GC_SHAPE(2), (const double[]){99, NAN}, 0, 0, "max_last 600 columns");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(2), (const double[]){99, 400}, 0, 0, "argmax 600 columns");
    /* 6 * (0 + ... + 99) = 29700; the second row's sum is nan */
    gc_test_expect_values(sum, GC_F32, GC_SHAPE(2), (const double[]){29700, NAN}, 0, 0, "sum_last 600 columns");
    gc_tensor_release(max);
    gc_tensor_release(argmax);
    gc_tensor_release(sum);
    gc_tensor_release(x);
}

/* A 0-dim x is one element: the result is that element, 0-dim with or without keepdim. */
static void test_scalar_input(void) {
    gc_tensor *x = gc_scalar(2.5, GC_F32, gc_cpu());
    REQUIRE(x);
    gc_tensor *sum = gc_sum_last(x, true), *mean = gc_mean_last(x, false), *argmax = NULL;
    gc_tensor *max = gc_max_last(x, true, &argmax), *all = gc_max_all(x);
    gc_test_expect_values(sum, GC_F32, 0, NULL, (const double[]){2.5}, 0, 0, "sum_last of a scalar, keepdim");
    gc_test_expect_values(mean, GC_F32, 0, NULL, (const double[]){2.5}, 0, 0, "mean_last of a scalar");
    gc_test_expect_values(max, GC_F32, 0, NULL, (const double[]){2.5}, 0, 0, "max_last of a scalar");
    gc_test_expect_values(argmax, GC_I32, 0, NULL, (const double[]){0}, 0, 0, "argmax of a scalar");
    gc_test_expect_values(all, GC_F32, 0, NULL, (const double[]){2.5}, 0, 0, "max_all of a scalar");
    gc_tensor *tensors[] = {x, sum, mean, max, argmax, all};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) gc_tensor_release(tensors[i]);
}

/* Over an empty last dim: sum 0, mean nan; with no rows, an empty result. */
static void test_empty(void) {
    gc_tensor *no_cols = gc_zeros(GC_SHAPE(3, 0), GC_F32, gc_cpu());
    gc_tensor *no_rows = gc_zeros(GC_SHAPE(0, 4), GC_F32, gc_cpu());
    REQUIRE(no_cols && no_rows);
    gc_tensor *sum = gc_sum_last(no_cols, true), *mean = gc_mean_last(no_cols, false);
    gc_tensor *sum_all = gc_sum_all(no_cols), *mean_all = gc_mean_all(no_rows), *argmax = NULL;
    gc_tensor *max = gc_max_last(no_rows, false, &argmax);
    gc_test_expect_values(sum, GC_F32, GC_SHAPE(3, 1), (const double[]){0, 0, 0}, 0, 0, "sum_last over 0 columns");
    gc_test_expect_values(mean, GC_F32, GC_SHAPE(3), (const double[]){NAN, NAN, NAN}, 0, 0,
                          "mean_last over 0 columns");
    gc_test_expect_values(sum_all, GC_F32, 0, NULL, (const double[]){0}, 0, 0, "sum_all of an empty tensor");
    gc_test_expect_values(mean_all, GC_F32, 0, NULL, (const double[]){NAN}, 0, 0, "mean_all of an empty tensor");
    gc_test_expect_values(max, GC_F32, GC_SHAPE(0), NULL, 0, 0, "max_last of 0 rows");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(0), NULL, 0, 0, "argmax of 0 rows");
    gc_tensor *all[] = {no_cols, no_rows, sum, mean, sum_all, mean_all, max, argmax};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

/* i32: sum (wrapping modulo 2^32 past the i32 range) and max keep the dtype. */
static void test_i32(void) {
    gc_tensor *x = gc_test_tensor(GC_I32, GC_SHAPE(3, 3), (const double[]){
        1, 2, 3,
        INT32_MAX, 1, 0,
        INT32_MIN, -1, -7});
    gc_tensor *sum = gc_sum_last(x, false), *argmax = NULL, *max = gc_max_last(x, false, &argmax);
    gc_tensor *sum_all = gc_sum_all(x), *max_all = gc_max_all(x);
    gc_test_expect_values(sum, GC_I32, GC_SHAPE(3), (const double[]){6, INT32_MIN, INT32_MAX - 7}, 0, 0,
                          "sum_last i32 wraps");
    gc_test_expect_values(max, GC_I32, GC_SHAPE(3), (const double[]){3, INT32_MAX, -1}, 0, 0, "max_last i32");
    gc_test_expect_values(argmax, GC_I32, GC_SHAPE(3), (const double[]){2, 0, 1}, 0, 0, "argmax i32");
    /* 6 + 2^31 + (-2^31 - 8) = -2 */
    gc_test_expect_values(sum_all, GC_I32, 0, NULL, (const double[]){-2}, 0, 0, "sum_all i32");
    gc_test_expect_values(max_all, GC_I32, 0, NULL, (const double[]){INT32_MAX}, 0, 0, "max_all i32");
    gc_tensor *all[] = {x, sum, max, argmax, sum_all, max_all};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

/* --- over everything ------------------------------------------------------------------ */

static void test_all(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 1, 3), (const double[]){1, 2, 3, -4, 9, 0.5});
    gc_tensor *sum = gc_sum_all(x), *mean = gc_mean_all(x), *max = gc_max_all(x);
    gc_test_expect_values(sum, GC_F32, 0, NULL, (const double[]){11.5}, 0, 0, "sum_all");
    gc_test_expect_values(mean, GC_F32, 0, NULL, (const double[]){11.5 / 6}, 0, F32_ROUNDING, "mean_all");
    gc_test_expect_values(max, GC_F32, 0, NULL, (const double[]){9}, 0, 0, "max_all");
    gc_tensor *all[] = {x, sum, mean, max};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

/* --- accumulation in double, rounded once ----------------------------------------------- */

/* 2^24 + 1 + 1: an f32 accumulator loses each 1 (2^24 + 1 is a tie, rounded to even);
 * the double one gives 2^24 + 2, which f32 holds. */
static void test_f32_accumulates_in_double(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(3), (const double[]){16777216, 1, 1});
    gc_tensor *sum = gc_sum_all(x);
    gc_test_expect_values(sum, GC_F32, 0, NULL, (const double[]){16777218}, 0, 0, "f32 sum in double");
    gc_tensor_release(sum);
    gc_tensor_release(x);
}

/* Each sum lies just above a tie of the 16-bit type, by less than half an f32 ulp: a
 * double accumulator rounded once gives the upper neighbour, while an f32 accumulator
 * (or double -> f32 -> 16 bits) lands on the tie and rounds to even, down to 1. */
static void test_half_types_round_once(void) {
    /* bf16 ulp at 1 is 2^-7: 1 + 2^-8 is the tie, 2^-32 tips it */
    gc_tensor *b = gc_test_tensor(GC_BF16, GC_SHAPE(1, 3), (const double[]){1, ldexp(1, -8), ldexp(1, -32)});
    /* f16 ulp at 1 is 2^-10: 1 + 2^-11 is the tie, 2^-24 (an f16 subnormal) tips it */
    gc_tensor *h = gc_test_tensor(GC_F16, GC_SHAPE(1, 3), (const double[]){1, ldexp(1, -11), ldexp(1, -24)});
    gc_tensor *b_sum = gc_sum_last(b, false), *h_sum = gc_sum_all(h);
    gc_test_expect_values(b_sum, GC_BF16, GC_SHAPE(1), (const double[]){1 + ldexp(1, -7)}, 0, 0,
                          "bf16 sum rounded once");
    gc_test_expect_values(h_sum, GC_F16, 0, NULL, (const double[]){1 + ldexp(1, -10)}, 0, 0,
                          "f16 sum rounded once");
    gc_tensor *all[] = {b, h, b_sum, h_sum};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

static void test_half_types(void) {
    static const gc_dtype dtypes[] = {GC_F16, GC_BF16};
    for (int d = 0; d < 2; d++) {
        gc_tensor *x = gc_test_tensor(dtypes[d], GC_SHAPE(2, 3), (const double[]){1, 2, 4, -8, 0.5, -0.25});
        gc_tensor *mean = gc_mean_last(x, false), *argmax = NULL, *max = gc_max_last(x, false, &argmax);
        /* 7/3 and -7.75/3 rounded once to 8 (bf16) or 11 (f16) significant bits: within
         * 2^-8 (2^-11) relative */
        double rounding = dtypes[d] == GC_BF16 ? 1.0 / 256 : 1.0 / 2048;
        gc_test_expect_values(mean, dtypes[d], GC_SHAPE(2), (const double[]){7.0 / 3, -7.75 / 3}, 0, rounding,
                              "mean_last f16/bf16");
        gc_test_expect_values(max, dtypes[d], GC_SHAPE(2), (const double[]){4, 0.5}, 0, 0, "max_last f16/bf16");
        gc_test_expect_values(argmax, GC_I32, GC_SHAPE(2), (const double[]){2, 1}, 0, 0, "argmax f16/bf16");
        gc_tensor *all[] = {x, mean, max, argmax};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
    }
}

/* --- softmax and log-softmax -------------------------------------------------------------- */

/* softmax([0, ln 2, ln 3]) = [1, 2, 3] / 6. The f32 inputs ln 2 and ln 3 are off by up to
 * 2^-24 relative (moving the outputs by about 1.1 * 2^-24); the f32 softmax rounds x - max
 * (0.4 * 2^-24), its exp is within 1 ulp (2^-23 relative) and the sum and the result round
 * once each: 2^-21 covers it. Log-softmax, in double, only has the inputs' error and the
 * final rounding: 2^-22. */
static void test_softmax_values(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){0, log(2), log(3), 5, 5, 5});
    gc_tensor *y = gc_softmax(x), *log_y = gc_log_softmax(x);
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2, 3), (const double[]){1.0 / 6, 2.0 / 6, 3.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 3},
                          0, 8 * F32_ROUNDING, "softmax");
    gc_test_expect_values(log_y, GC_F32, GC_SHAPE(2, 3),
                          (const double[]){-log(6), log(2.0 / 6), log(3.0 / 6), -log(3), -log(3), -log(3)}, 0,
                          4 * F32_ROUNDING, "log_softmax");
    gc_tensor_release(y);
    gc_tensor_release(log_y);
    gc_tensor_release(x);
}

/* exp(1000) overflows; the row max is subtracted first, so the results are finite. */
static void test_softmax_large_values(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2), (const double[]){1000, 1001});
    gc_tensor *y = gc_softmax(x), *log_y = gc_log_softmax(x);
    double lse = log1p(exp(-1.0)); /* log(e^-1 + e^0) */
    gc_test_expect_values(y, GC_F32, GC_SHAPE(2), (const double[]){exp(-1 - lse), exp(-lse)}, 0, F32_ROUNDING,
                          "softmax of 1000, 1001");
    gc_test_expect_values(log_y, GC_F32, GC_SHAPE(2), (const double[]){-1 - lse, -lse}, 0, F32_ROUNDING,
                          "log_softmax of 1000, 1001");
    gc_tensor_release(y);
    gc_tensor_release(log_y);
    gc_tensor_release(x);
}

/* -inf entries get probability 0 (log-probability -inf); a row of -inf only has no
 * distribution and gives nan, as in PyTorch; so does a row holding a nan or a +inf. In f64
 * and in f32, whose softmax has a path of its own. */
static void test_softmax_inf_nan(void) {
    const double values[12] = {
        0, -INFINITY, 0,
        -INFINITY, -INFINITY, -INFINITY,
        1, NAN, 2,
        0, INFINITY, 1};
    const double want[12] = {0.5, 0, 0.5, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    const double want_log[12] = {-log(2), -INFINITY, -log(2), NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    const gc_dtype dtypes[] = {GC_F64, GC_F32};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        gc_tensor *x = gc_test_tensor(dtypes[d], GC_SHAPE(4, 3), values);
        gc_tensor *y = gc_softmax(x), *log_y = gc_log_softmax(x);
        /* log 2 rounds once into the dtype */
        double rounding = dtypes[d] == GC_F32 ? F32_ROUNDING : F64_ROUNDING;
        gc_test_expect_values(y, dtypes[d], GC_SHAPE(4, 3), want, 0, 0, "softmax with -inf, nan and inf");
        gc_test_expect_values(log_y, dtypes[d], GC_SHAPE(4, 3), want_log, 0, rounding,
                              "log_softmax with -inf, nan and inf");
        gc_tensor_release(y);
        gc_tensor_release(log_y);
        gc_tensor_release(x);
    }
}

/* Rows of 600 (past the double kernel's chunk), 3-D: each row sums to 1; a row of 7s is
 * uniform, a row of x_j = j * 0.01 has softmax exp(x_j - x_599) / sum_k exp(x_k - x_599).
 * f64 sums of 600 terms take a few hundred roundings of 2^-53: 1e-13. In f32, x - max (up to 6) rounds by up to 6 * 2^-24 and exp
 * adds 1 ulp, in each term and so in their sum, and the result rounds once:
 * (2 * 8 + 1) * 2^-24 < 20 * 2^-24. */
static void test_softmax_long_rows_3d(void) {
    enum { cols = 600 };
    double data[2 * cols];
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < cols; j++) data[r * cols + j] = r ? 0.01 * j : 7;
    const struct {
        gc_dtype dtype;
        double rtol;
    } cases[] = {{GC_F64, 1e-13}, {GC_F32, 20 * F32_ROUNDING}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        gc_tensor *x = gc_test_tensor(cases[c].dtype, GC_SHAPE(2, 1, cols), data);
        /* the f32 inputs 0.01 j are rounded: the softmax of the values x holds */
        double held[cols], want[2 * cols], held_sum = 0;
        for (int j = 0; j < cols; j++)
            held[j] = cases[c].dtype == GC_F32 ? (double)(float)data[cols + j] : data[cols + j];
        for (int j = 0; j < cols; j++) held_sum += exp(held[j] - held[cols - 1]);
        for (int j = 0; j < 2 * cols; j++)
            want[j] = j < cols ? 1.0 / cols : exp(held[j - cols] - held[cols - 1]) / held_sum;
        gc_tensor *y = gc_softmax(x), *row_sums = gc_sum_last(y, false);
        gc_test_expect_values(y, cases[c].dtype, GC_SHAPE(2, 1, cols), want, 0, cases[c].rtol,
                              "softmax of 600 columns");
        gc_test_expect_values(row_sums, cases[c].dtype, GC_SHAPE(2, 1), (const double[]){1, 1}, 0, cases[c].rtol,
                              "softmax rows sum to 1");
        gc_tensor_release(row_sums);
        gc_tensor_release(y);
        gc_tensor_release(x);
    }
}

/* A 0-dim x is one row of one element: softmax 1, log-softmax 0. An empty x gives an
 * empty result. */
static void test_softmax_scalar_and_empty(void) {
    gc_tensor *scalar = gc_scalar(-3, GC_F32, gc_cpu()), *empty = gc_zeros(GC_SHAPE(2, 0), GC_F32, gc_cpu());
    REQUIRE(scalar && empty);
    gc_tensor *y = gc_softmax(scalar), *log_y = gc_log_softmax(scalar), *y_empty = gc_softmax(empty);
    gc_test_expect_values(y, GC_F32, 0, NULL, (const double[]){1}, 0, 0, "softmax of a scalar");
    gc_test_expect_values(log_y, GC_F32, 0, NULL, (const double[]){0}, 0, 0, "log_softmax of a scalar");
    gc_test_expect_values(y_empty, GC_F32, GC_SHAPE(2, 0), NULL, 0, 0, "softmax of [2, 0]");
    gc_tensor *all[] = {scalar, empty, y, log_y, y_empty};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
}

static void test_softmax_half_types(void) {
    static const gc_dtype dtypes[] = {GC_F16, GC_BF16};
    double e = exp(1.0), total = 1 + e + e * e;
    for (int d = 0; d < 2; d++) {
        gc_tensor *x = gc_test_tensor(dtypes[d], GC_SHAPE(3), (const double[]){0, 1, 2});
        gc_tensor *y = gc_softmax(x), *log_y = gc_log_softmax(x);
        /* rounded once to 8 (bf16) or 11 (f16) significant bits: within 2^-8 (2^-11) relative */
        double rounding = dtypes[d] == GC_BF16 ? 1.0 / 256 : 1.0 / 2048;
        gc_test_expect_values(y, dtypes[d], GC_SHAPE(3), (const double[]){1 / total, e / total, e * e / total}, 0,
                              rounding, "softmax f16/bf16");
        gc_test_expect_values(log_y, dtypes[d], GC_SHAPE(3),
                              (const double[]){-log(total), 1 - log(total), 2 - log(total)}, 0, rounding,
                              "log_softmax f16/bf16");
        gc_tensor_release(y);
        gc_tensor_release(log_y);
        gc_tensor_release(x);
    }
}

/* --- errors ------------------------------------------------------------------------------ */

static void call_softmax(void *x) { gc_softmax(x); }
static void call_log_softmax(void *x) { gc_log_softmax(x); }
static void call_mean_last(void *x) { gc_mean_last(x, false); }
static void call_mean_all(void *x) { gc_mean_all(x); }
static void call_max_last(void *x) { gc_max_last(x, true, NULL); }
static void call_max_all(void *x) { gc_max_all(x); }
static void call_max_last_argmax(void *x) {
    gc_tensor *argmax;
    gc_max_last(x, false, &argmax);
}

static void test_fatal_errors(void) {
    gc_tensor *ints = gc_test_tensor(GC_I32, GC_SHAPE(2), (const double[]){1, 2});
    gc_tensor *no_cols = gc_zeros(GC_SHAPE(3, 0), GC_F32, gc_cpu());
    /* no element, so nothing is allocated, but indices up to 2^31 would not fit in i32 */
    gc_tensor *too_wide = gc_zeros(GC_SHAPE(0, (int64_t)1 << 31), GC_F32, gc_cpu());
    REQUIRE(no_cols && too_wide);
    gc_test_expect_fatal(call_softmax, ints, "softmax: needs a floating-point tensor, got [2] i32 cpu");
    gc_test_expect_fatal(call_log_softmax, ints, "log_softmax: needs a floating-point tensor, got [2] i32 cpu");
    gc_test_expect_fatal(call_mean_last, ints, "mean_last: needs a floating-point tensor, got [2] i32 cpu");
    gc_test_expect_fatal(call_mean_all, ints, "mean_all: needs a floating-point tensor");
    gc_test_expect_fatal(call_max_last, no_cols, "max_last: [3, 0] f32 cpu has no element to take the max of");
    gc_test_expect_fatal(call_max_all, no_cols, "max_all: [3, 0] f32 cpu has no element to take the max of");
    gc_test_expect_fatal(call_max_last_argmax, too_wide, "max_last: the indices of a last dim of 2147483648");
    gc_tensor_release(ints);
    gc_tensor_release(no_cols);
    gc_tensor_release(too_wide);
}

/* --- sum_to_shape: reduced dims summed in place against moved last ---------------------- */

/* x summed over its dims [first, first + count) the other way sum_to_shape can take: those
 * dims moved last (a permute), flattened, summed as rows. */
static gc_tensor *sum_moved_last(const gc_tensor *x, int first, int count) {
    int perm[GC_MAX_DIMS], n = 0;
    int64_t rows_shape[GC_MAX_DIMS], reduced = 1;
    for (int d = 0; d < x->ndim; d++)
        if (d < first || d >= first + count) {
            rows_shape[n] = x->shape[d];
            perm[n++] = d;
        }
    for (int d = first; d < first + count; d++) {
        perm[n + d - first] = d;
        reduced *= x->shape[d];
    }
    rows_shape[n] = reduced;
    gc_tensor *moved = gc_permute(x, perm), *rows = gc_reshape(moved, n + 1, rows_shape);
    gc_tensor *sums = gc_sum_last(rows, false);
    gc_tensor_release(moved);
    gc_tensor_release(rows);
    return sums;
}

/* Both ways add the same doubles in the same order and round once: bitwise equal, in every
 * dtype (i32 sums wrap alike), for runs of reduced dims at the front and in the middle,
 * last dims that are no multiple of the kernel's column blocks (up to 512 columns, narrowed
 * to multiples of 16 to give each thread some), long runs split between threads, and empty
 * dims. */
static void test_sum_to_shape_in_place(void) {
    const struct {
        int ndim;
        int64_t shape[4];
        int first, count;
    } cases[] = {
        {3, {3, 5, 70}, 0, 2},     /* a bias gradient: [B, T, H] -> [H] */
        {3, {4, 6, 33}, 1, 1},     /* [4, 6, 33] -> [4, 1, 33] */
        {4, {2, 3, 4, 5}, 1, 2},   /* a run in the middle */
        {2, {4099, 40}, 0, 1},     /* a long run: many rows per column block */
        {2, {9, 1100}, 0, 1},      /* two full blocks and a part */
        {2, {0, 7}, 0, 1},         /* nothing to sum: zeros */
        {3, {0, 3, 4}, 1, 1},      /* no result elements */
    };
    const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16, GC_I32};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
            int ndim = cases[c].ndim, first = cases[c].first, count = cases[c].count;
            int64_t target[4];
            for (int d = 0; d < ndim; d++) target[d] = d >= first && d < first + count ? 1 : cases[c].shape[d];
            /* i32 values up to 2^30, so that the sums leave the i32 range and wrap */
            double bound = dtypes[t] == GC_I32 ? 1073741824.0 : 3.0;
            gc_tensor *x = gc_test_random_in(ndim, cases[c].shape, dtypes[t], -bound, bound, 100 + c);
            gc_tensor *got = gc_sum_to_shape(x, ndim, target), *moved = sum_moved_last(x, first, count);
            gc_tensor *want = gc_reshape(moved, ndim, target);
            char what[96];
            snprintf(what, sizeof what, "sum_to_shape case %zu, %s", c, gc_dtype_name(dtypes[t]));
            gc_test_expect_close(want, got, 0, 0, what);
            gc_tensor_release(x);
            gc_tensor_release(got);
            gc_tensor_release(moved);
            gc_tensor_release(want);
        }
}

/* --- error chaining and allocation failures ----------------------------------------------- */

static void test_null_chaining(void) {
    gc_tensor *argmax = (gc_tensor *)&argmax; /* anything but NULL: must be overwritten */
    CHECK(gc_sum_last(NULL, false) == NULL);
    CHECK(gc_mean_last(NULL, true) == NULL);
    CHECK(gc_max_last(NULL, false, &argmax) == NULL);
    CHECK(argmax == NULL);
    CHECK(gc_sum_all(NULL) == NULL && gc_mean_all(NULL) == NULL && gc_max_all(NULL) == NULL);
    CHECK(gc_softmax(NULL) == NULL && gc_log_softmax(NULL) == NULL);
}

/* With room for the values but not for the argmax, max_last returns NULL, releases the
 * values and records the error. */
static void test_argmax_allocation_failure(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 4), (const double[]){1, 2, 3, 4, 5, 6, 7, 8});
    size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_memory_set_limit(gc_cpu(), live + 2 * sizeof(float)); /* the [2] f32 values fit, the argmax not */
    gc_clear_error();
    gc_tensor *argmax = (gc_tensor *)&argmax, *max = gc_max_last(x, false, &argmax);
    gc_memory_set_limit(gc_cpu(), 0);
    CHECK(max == NULL && argmax == NULL);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == live);
    gc_tensor_release(x);
}

int main(void) {
    GC_TEST_CASE(test_last_1d);
    GC_TEST_CASE(test_last_2d);
    GC_TEST_CASE(test_last_3d);
    GC_TEST_CASE(test_max_ties_inf_nan);
    GC_TEST_CASE(test_long_rows);
    GC_TEST_CASE(test_scalar_input);
    GC_TEST_CASE(test_empty);
    GC_TEST_CASE(test_i32);
    GC_TEST_CASE(test_all);
    GC_TEST_CASE(test_f32_accumulates_in_double);
    GC_TEST_CASE(test_half_types_round_once);
    GC_TEST_CASE(test_half_types);
    GC_TEST_CASE(test_softmax_values);
    GC_TEST_CASE(test_softmax_large_values);
    GC_TEST_CASE(test_softmax_inf_nan);
    GC_TEST_CASE(test_softmax_long_rows_3d);
    GC_TEST_CASE(test_softmax_scalar_and_empty);
    GC_TEST_CASE(test_softmax_half_types);
    GC_TEST_CASE(test_sum_to_shape_in_place);
    GC_TEST_CASE(test_fatal_errors);
    GC_TEST_CASE(test_null_chaining);
    GC_TEST_CASE(test_argmax_allocation_failure);
    return gc_test_result();
}
