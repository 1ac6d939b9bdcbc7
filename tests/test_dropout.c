/* Dropout on the CPU (gc_dropout, gc_nn_dropout): the identity cases, the kept fraction of
 * a million draws, kept values x / (1 - p) and dropped ones 0, the mask as a function of
 * (seed, offset + index) only, every float dtype, the refused arguments, and the gradient
 * (against the forward's mask, and by finite differences); gc_dropout_rows against gathered
 * rows of gc_dropout. */
#include "gradcheck.h"
#include "same_bytes.h"
#include "values.h"

#define MILLION 1000000

/* Element i is kept when (word(offset + i) >> 8) >= ceil(p 2^24): the definition in ops.h,
 * written out independently of the kernel. */
static bool kept_by_definition(double p, uint64_t seed, uint64_t offset, int64_t i) {
    uint32_t threshold = (uint32_t)ceil(p * 16777216.0);
    return (gc_philox_word(seed, offset + (uint64_t)i) >> 8) >= threshold;
}

/* The elements of t as doubles, in a malloc'ed array. */
static double *host_values(const gc_tensor *t) {
    double *values = malloc(sizeof(double) * (size_t)(gc_numel(t) ? gc_numel(t) : 1));
    REQUIRE(values);
    gc_to_host_f64(t, values);
    return values;
}

/* f32 [n] uniform in [1, 2): no zeros, so an element of the output is 0 exactly when dropped. */
static gc_tensor *nonzero_input(int64_t n, gc_dtype dtype) {
    gc_tensor *x = gc_uniform(1, &n, dtype, gc_cpu(), 1.0, 2.0, 31, 0);
    REQUIRE(x);
    return x;
}

/* p = 0 and evaluation give x itself (a new reference); gc_dropout with p = 0 copies x. */
static void test_identity(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1, -2, 3.5, 0, -0.25, 7});
    int references = x->refcount;
    gc_tensor *no_p = gc_nn_dropout(x, 0.0, true), *evaluation = gc_nn_dropout(x, 0.5, false);
    CHECK(no_p == x && evaluation == x);
    CHECK(x->refcount == references + 2);
    gc_tensor *copy = gc_dropout(x, 0.0, 1, 0);
    CHECK(copy != x);
    gc_test_expect_same_bytes(x, copy, "gc_dropout with p = 0");
    gc_tensor_release(no_p);
    gc_tensor_release(evaluation);
    CHECK(x->refcount == references);
    gc_tensor_release(copy);
    gc_tensor_release(x);
}

/* Over a million elements: the kept count, the mask element by element, and the values. */
static void test_kept_fraction_and_values(void) {
    const uint64_t seed = 17, offset = 0;
    gc_tensor *x = nonzero_input(MILLION, GC_F32);
    double *xs = host_values(x);
    const double ps[] = {0.1, 0.5, 0.9};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        double p = ps[k], scale = 1.0 / (1.0 - p);
        gc_tensor *y = gc_dropout(x, p, seed, offset);
        gc_tensor *scaled = gc_mul_scalar(x, scale); /* x * scale in f32, rounded once */
        REQUIRE(y && scaled);
        double *ys = host_values(y), *want = host_values(scaled);
        int64_t kept = 0, wrong_mask = 0, wrong_value = 0, wrong_ratio = 0;
        for (int64_t i = 0; i < MILLION; i++) {
            bool is_kept = ys[i] != 0;
            kept += is_kept;
            wrong_mask += is_kept != kept_by_definition(p, seed, offset, i);
            wrong_value += is_kept && ys[i] != want[i];
            /* Against x / (1 - p) in double: two f32 roundings (of the scale and of the
             * product), each within 2^-24 relative. */
            wrong_ratio += is_kept && fabs(ys[i] - xs[i] * scale) > 0x1p-23 * xs[i] * scale;
        }
        /* The kept count is Binomial(n, q), q = 1 - p (to 2^-24, the threshold's
         * granularity): mean n q, standard deviation sqrt(n p q) (300 at p = 0.1, 500 at
         * 0.5). Six deviations hold with probability 1 - 2e-9, so a pass is no luck of the
         * seed, while a kernel keeping with probability p instead of 1 - p is off by
         * 800000 at p = 0.1. */
        double expected = MILLION * (1 - p), bound = 6 * sqrt(MILLION * p * (1 - p));
        CHECK_MSG(fabs((double)kept - expected) <= bound, "p = %g: kept %lld, want %g +- %g", p, (long long)kept,
                  expected, bound);
        CHECK_MSG(wrong_mask == 0, "p = %g: %lld elements disagree with the definition of the mask", p,
                  (long long)wrong_mask);
        CHECK_MSG(wrong_value == 0, "p = %g: %lld kept elements are not x * (1/(1-p)) in f32", p,
                  (long long)wrong_value);
        CHECK_MSG(wrong_ratio == 0, "p = %g: %lld kept elements are not x / (1-p)", p, (long long)wrong_ratio);
        if (p == 0.5) { /* scale 2 is exact: kept elements are exactly 2x */
            int64_t inexact = 0;
            for (int64_t i = 0; i < MILLION; i++) inexact += ys[i] != 0 && ys[i] != 2 * xs[i];
            CHECK(inexact == 0);
        }
        free(ys);
        free(want);
        gc_tensor_release(y);
        gc_tensor_release(scaled);
    }
    free(xs);
    gc_tensor_release(x);
}

/* The threshold's edge: with p = k 2^-24 for k = word >> 8 of element i's word, element i sits
 * exactly on the threshold and is kept; one step of 2^-24 more drops it. */
static void test_threshold_edge(void) {
    gc_tensor *x = gc_full(GC_SHAPE(8), GC_F32, gc_cpu(), 1.0);
    REQUIRE(x);
    for (int64_t i = 0; i < 8; i++) {
        uint32_t k = gc_philox_word(4, 100 + (uint64_t)i) >> 8;
        if (k + 1 >= 1u << 24) continue; /* p would reach 1 */
        gc_tensor *on_edge = gc_dropout(x, k * 0x1p-24, 4, 100), *past_edge = gc_dropout(x, (k + 1) * 0x1p-24, 4, 100);
        REQUIRE(on_edge && past_edge);
        CHECK_MSG(((const float *)gc_data(on_edge))[i] != 0, "element %lld with word >> 8 = p 2^24 = %u dropped",
                  (long long)i, k);
        CHECK_MSG(((const float *)gc_data(past_edge))[i] == 0, "element %lld with word >> 8 = p 2^24 - 1 = %u kept",
                  (long long)i, k);
        gc_tensor_release(on_edge);
        gc_tensor_release(past_edge);
    }
    gc_tensor_release(x);
}

/* Element i depends on (seed, offset + i) only: a slice of a big draw equals a draw of the
 * slice at the shifted offset, also with an offset past 2^32 words (the counter's high word)
 * and one that starts inside a Philox block. */
static void test_mask_is_positional(void) {
    gc_tensor *x = gc_test_random(GC_SHAPE(1000), GC_F32, 3);
    const uint64_t offsets[] = {5, (1ull << 33) + 1};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        gc_tensor *big = gc_dropout(x, 0.3, 77, offsets[k]);
        gc_tensor *again = gc_dropout(x, 0.3, 77, offsets[k]);
        gc_tensor *x_part = gc_slice0(x, 101, 700), *big_part = gc_slice0(big, 101, 700);
        gc_tensor *part = gc_dropout(x_part, 0.3, 77, offsets[k] + 101);
        gc_test_expect_same_bytes(big, again, "the same draw twice");
        gc_test_expect_same_bytes(big_part, part, "a slice drawn at the shifted offset");
        gc_tensor *other_seed = gc_dropout(x, 0.3, 78, offsets[k]), *other_offset = gc_dropout(x, 0.3, 77, 0);
        CHECK(gc_test_first_byte_difference(big, other_seed) >= 0);
        CHECK(gc_test_first_byte_difference(big, other_offset) >= 0);
        gc_tensor *tensors[] = {big, again, x_part, big_part, part, other_seed, other_offset};
        for (int i = 0; i < 7; i++) gc_tensor_release(tensors[i]);
    }
    gc_tensor_release(x);
}

/* f16, bf16 and f64 use the f32 mask, and a kept element is x * scale computed in f32 (f64
 * for f64) and rounded once: what gc_mul_scalar gives. */
static void test_dtypes(void) {
    const double p = 0.1;
    gc_tensor *x32 = nonzero_input(4097, GC_F32);
    gc_tensor *y32 = gc_dropout(x32, p, 5, 3);
    double *mask = host_values(y32);
    const gc_dtype dtypes[] = {GC_F16, GC_BF16, GC_F64};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        gc_tensor *x = gc_cast(x32, dtypes[d]);
        gc_tensor *y = gc_dropout(x, p, 5, 3), *scaled = gc_mul_scalar(x, 1.0 / (1.0 - p));
        REQUIRE(y && scaled);
        CHECK(y->dtype == dtypes[d]);
        double *ys = host_values(y), *want = host_values(scaled);
        int64_t wrong = 0;
        for (int64_t i = 0; i < 4097; i++) wrong += ys[i] != (mask[i] != 0 ? want[i] : 0);
        CHECK_MSG(wrong == 0, "%s: %lld elements differ", gc_dtype_name(dtypes[d]), (long long)wrong);
        free(ys);
        free(want);
        gc_tensor_release(x);
        gc_tensor_release(y);
        gc_tensor_release(scaled);
    }
    /* by hand: p = 1/2 doubles what it keeps, exactly in f16 */
    const double values[4] = {1.5, -2, 0.25, 3};
    gc_tensor *x = gc_test_tensor(GC_F16, GC_SHAPE(2, 2), values);
    gc_tensor *y = gc_dropout(x, 0.5, 11, 0);
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = kept_by_definition(0.5, 11, 0, i) ? 2 * values[i] : 0;
    gc_test_expect_values(y, GC_F16, GC_SHAPE(2, 2), want, 0, 0, "f16 by hand");
    free(mask);
    gc_tensor_release(x);
    gc_tensor_release(y);
    gc_tensor_release(x32);
    gc_tensor_release(y32);
}

/* The gradient is g * mask / (1 - p) with the forward's mask, regenerated from the recorded
 * (seed, offset) even after the generator has moved on. */
static void test_gradient_uses_forward_mask(void) {
    const double p = 0.3;
    gc_manual_seed(8);
    gc_tensor *x = nonzero_input(257, GC_F32);
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_nn_dropout(x, p, true);
    gc_tensor *unrelated = gc_nn_dropout(x, p, true); /* moves the generator on */
    gc_tensor *g = gc_test_random(GC_SHAPE(257), GC_F32, 12);
    REQUIRE(gc_backward(&y, &g, 1) == GC_OK);
    double *ys = host_values(y), *gs = host_values(g), *grads = host_values(gc_grad(x));
    int64_t wrong = 0;
    for (int i = 0; i < 257; i++) {
        double want = ys[i] != 0 ? (double)((float)gs[i] * (float)(1.0 / (1.0 - p))) : 0.0;
        wrong += grads[i] != want;
    }
    CHECK_MSG(wrong == 0, "%lld gradient elements are not g * mask / (1 - p)", (long long)wrong);
    free(ys);
    free(gs);
    free(grads);
    gc_tensor_release(x);
    gc_tensor_release(y);
    gc_tensor_release(unrelated);
    gc_tensor_release(g);
}

/* gc_dropout_rows against its definition: rows of x [P, D] gathered at `positions` and
 * dropped as rows give the rows of x's dropout gathered there, bit for bit, in every float
 * dtype, with D not a multiple of 4 (rows starting inside a Philox block) and offsets that
 * are not either; positions in runs, out of order, repeated; and its gradient is the same
 * dropout of g. */
static void test_rows(void) {
    const int32_t position_values[] = {0, 1, 2, 5, 6, 9, 10, 11, 3, 3, 12, 4};
    const int64_t rows = (int64_t)(sizeof position_values / sizeof *position_values), table_rows = 13;
    const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16};
    gc_tensor *positions = gc_from_host(position_values, GC_SHAPE(rows), GC_I32, gc_cpu());
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++)
        for (int64_t cols = 1; cols <= 9; cols += 2)
            for (uint64_t offset = 0; offset < 3; offset++) {
                gc_tensor *x = gc_test_random(GC_SHAPE(table_rows, cols), dtypes[t], (uint64_t)cols);
                gc_tensor *dropped = gc_dropout(x, 0.4, 41, offset), *want = gc_embedding(dropped, positions);
                gc_tensor *rows_of_x = gc_embedding(x, positions);
                gc_tensor *got = gc_dropout_rows(rows_of_x, positions, 0.4, 41, offset);
                REQUIRE(want && got);
                char what[96];
                snprintf(what, sizeof what, "dropout_rows %s, %lld columns, offset %llu", gc_dtype_name(dtypes[t]),
                         (long long)cols, (unsigned long long)offset);
                gc_test_expect_close(want, got, 0, 0, what);
                RELEASE(x, dropped, want, rows_of_x, got);
            }
    /* backward: the gradient of the rows is g dropped the same way */
    gc_tensor *x = gc_test_leaf(GC_SHAPE(rows, 6), -1, 1, 22), *g = gc_test_random(GC_SHAPE(rows, 6), GC_F64, 23);
    gc_tensor *y = gc_dropout_rows(x, positions, 0.3, 42, 7), *want = gc_dropout_rows(g, positions, 0.3, 42, 7);
    REQUIRE(y && want && gc_backward(&y, &g, 1) == GC_OK);
    gc_test_expect_close(want, gc_grad(x), 0, 0, "dropout_rows gradient");
    RELEASE(x, g, y, want, positions);
}

typedef struct dropout_args {
    double p;
    uint64_t seed, offset;
} dropout_args;

static gc_tensor *dropout_op(gc_tensor *const *inputs, const void *context) {
    const dropout_args *args = context;
    return gc_dropout(inputs[0], args->p, args->seed, args->offset);
}

/* the rows of x at positions 4, 0, 1 of a [*, 7] tensor */
static gc_tensor *dropout_rows_op(gc_tensor *const *inputs, const void *context) {
    const dropout_args *args = context;
    gc_tensor *positions = gc_from_host((const int32_t[]){4, 0, 1}, GC_SHAPE(3), GC_I32, gc_cpu());
    gc_tensor *y = gc_dropout_rows(inputs[0], positions, args->p, args->seed, args->offset);
    gc_tensor_release(positions);
    return y;
}

static void test_gradcheck(void) {
    gc_tensor *x = gc_test_leaf(GC_SHAPE(3, 7), -1, 1, 21);
    gc_test_gradcheck("dropout", dropout_op, &x, 1, &(dropout_args){0.4, 6, 9});
    gc_test_gradcheck("dropout_rows", dropout_rows_op, &x, 1, &(dropout_args){0.4, 6, 9});
    gc_tensor_release(x);
}

static void drop_with(double p) {
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_dropout(x, p, 0, 0);
}
static void drop_all(void *arg) { (void)arg; drop_with(1.0); }
static void drop_negative(void *arg) { (void)arg; drop_with(-0.25); }
static void drop_nan(void *arg) { (void)arg; drop_with(NAN); }
static void drop_integers(void *arg) {
    (void)arg;
    gc_dropout(gc_zeros(GC_SHAPE(4), GC_I32, gc_cpu()), 0.5, 0, 0);
}
static void drop_rows_mismatched(void *arg) {
    (void)arg;
    gc_dropout_rows(gc_zeros(GC_SHAPE(4, 2), GC_F32, gc_cpu()), gc_zeros(GC_SHAPE(3), GC_I32, gc_cpu()), 0.5, 0, 0);
}
static void nn_drop_in_evaluation(void *arg) {
    (void)arg;
    gc_nn_dropout(gc_zeros(GC_SHAPE(4), GC_F32, gc_cpu()), 1.5, false);
}

static void test_errors(void) {
    gc_test_expect_fatal(drop_all, NULL, "dropout: p = 1 outside [0, 1) for [2, 3] f32 cpu");
    gc_test_expect_fatal(drop_negative, NULL, "dropout: p = -0.25 outside [0, 1)");
    gc_test_expect_fatal(drop_nan, NULL, "dropout: p = nan outside [0, 1)");
    gc_test_expect_fatal(drop_integers, NULL, "dropout: needs a floating-point tensor, got [4] i32 cpu");
    gc_test_expect_fatal(nn_drop_in_evaluation, NULL, "nn_dropout: p = 1.5 outside [0, 1) for [4] f32 cpu");
    gc_test_expect_fatal(drop_rows_mismatched, NULL,
                         "dropout_rows: x [4, 2] f32 cpu is not [N, D] or positions [3] i32 cpu not i32 [N] on its device");
}

int main(void) {
    test_identity();
    test_kept_fraction_and_values();
    test_threshold_edge();
    test_mask_is_positional();
    test_dtypes();
    test_gradient_uses_forward_mask();
    test_rows();
    test_gradcheck();
    test_errors();
    return gc_test_result();
}
