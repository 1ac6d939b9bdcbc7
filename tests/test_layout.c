/* Gather and layout ops on the CPU against hand-written results: embedding, permute,
 * transpose, cat0 and cast. These ops only move or convert values, so every expected
 * value is exact (tolerance 0) unless stated. */
#include "tensor/op_internal.h"
#include "values.h"


/* 0, 1, 2, ... as a tensor of the given shape and dtype. */
static gc_tensor *counting(gc_dtype dtype, int ndim, const int64_t *shape) {
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    gc_tensor *flat = gc_arange(numel, 0, 1, dtype, gc_cpu());
    REQUIRE(flat);
    gc_tensor *t = gc_reshape(flat, ndim, shape);
    REQUIRE(t);
    gc_tensor_release(flat);
    return t;
}

/* Checks that `got` has the shape and exact values wanted, then releases it. */
static void expect(gc_tensor *got, int ndim, const int64_t *shape, const double *want, const char *what) {
    REQUIRE(got);
    gc_tensor *w = gc_from_host(want, ndim, shape, GC_F64, gc_cpu());
    REQUIRE(w);
    gc_test_expect_close(w, got, 0, 0, what);
    gc_tensor_release(w);
    gc_tensor_release(got);
}

/* --- embedding --- */

static void test_embedding(void) {
    /* table [4, 3], row r = (10r, 10r + 1, 10r + 2) */
    gc_tensor *table = gc_test_tensor(GC_F32, GC_SHAPE(4, 3), (const double[]){0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
    gc_tensor *ids = gc_test_tensor(GC_I32, GC_SHAPE(5), (const double[]){2, 0, 2, 3, 1}); /* 2 twice */
    gc_tensor *out = gc_embedding(table, ids);
    REQUIRE(out);
    CHECK(out->dtype == GC_F32);
    expect(out, GC_SHAPE(5, 3), (const double[]){20, 21, 22, 0, 1, 2, 20, 21, 22, 30, 31, 32, 10, 11, 12},
           "embedding [5] ids");

    gc_tensor *ids2 = gc_test_tensor(GC_I32, GC_SHAPE(2, 2), (const double[]){3, 3, 0, 1});
    expect(gc_embedding(table, ids2), GC_SHAPE(2, 2, 3), (const double[]){30, 31, 32, 30, 31, 32, 0, 1, 2, 10, 11, 12},
           "embedding [2, 2] ids");

    gc_tensor *id0 = gc_test_tensor(GC_I32, 0, NULL, (const double[]){1});
    expect(gc_embedding(table, id0), GC_SHAPE(3), (const double[]){10, 11, 12}, "embedding 0-dim id");

    /* A bf16 table moves as raw 2-byte elements; a sliced table starts at its offset. */
    gc_tensor *table16 = gc_cast(table, GC_BF16);
    REQUIRE(table16);
    expect(gc_embedding(table16, ids2), GC_SHAPE(2, 2, 3), (const double[]){30, 31, 32, 30, 31, 32, 0, 1, 2, 10, 11, 12},
           "embedding bf16 table");
    gc_tensor *rows_2_to_4 = gc_slice0(table, 2, 4);
    gc_tensor *ids_small = gc_test_tensor(GC_I32, GC_SHAPE(2), (const double[]){1, 0});
    expect(gc_embedding(rows_2_to_4, ids_small), GC_SHAPE(2, 3), (const double[]){30, 31, 32, 20, 21, 22},
           "embedding on a sliced table");

    CHECK(gc_embedding(NULL, ids) == NULL);
    CHECK(gc_embedding(table, NULL) == NULL);
    RELEASE(table, ids, ids2, id0, table16, rows_2_to_4, ids_small);
}

static void embedding_bad_id(void *arg) {
    gc_tensor *table = gc_zeros(GC_SHAPE(4, 3), GC_F32, gc_cpu());
    gc_tensor *ids = gc_test_tensor(GC_I32, GC_SHAPE(3), (const double[]){0, *(const double *)arg, 9});
    gc_embedding(table, ids);
}

static void embedding_i32_table(void *arg) {
    (void)arg;
    gc_tensor *table = gc_zeros(GC_SHAPE(4, 3), GC_I32, gc_cpu());
    gc_tensor *ids = gc_zeros(GC_SHAPE(2), GC_I32, gc_cpu());
    gc_embedding(table, ids);
}

static void embedding_f32_ids(void *arg) {
    (void)arg;
    gc_tensor *table = gc_zeros(GC_SHAPE(4, 3), GC_F32, gc_cpu());
    gc_tensor *ids = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu());
    gc_embedding(table, ids);
}

static void test_embedding_errors(void) {
    /* The first bad id is named with its position. */
    double id = 7, negative = -1;
    gc_test_expect_fatal(embedding_bad_id, &id, "embedding: id 7 at position 1 of ids [3] i32 cpu is outside [0, 4)");
    gc_test_expect_fatal(embedding_bad_id, &negative, "embedding: id -1 at position 1");
    gc_test_expect_fatal(embedding_i32_table, NULL, "embedding: needs a floating-point tensor, got [4, 3] i32 cpu");
    gc_test_expect_fatal(embedding_f32_ids, NULL, "embedding: needs a table [V, D] and i32 ids");
}

/* The backward's scatter: rows of the gradient added at their ids; an id outside [0, vocab)
 * adds nothing (on CUDA its forward's check is reported only at the next synchronisation,
 * after this kernel may have run: it must not write out of bounds meanwhile). */
static void test_embedding_backward(void) {
    gc_tensor *grad = counting(GC_F32, GC_SHAPE(4, 2));
    gc_tensor *ids = gc_test_tensor(GC_I32, GC_SHAPE(4), (const double[]){1, 3, -1, 1});
    expect(gc_embedding_backward(grad, ids, 3), GC_SHAPE(3, 2), (const double[]){0, 0, 0 + 6, 1 + 7, 0, 0},
           "rows 0 and 3 of the gradient into row 1; ids 3 and -1 (vocab 3) add nothing");
    RELEASE(grad, ids);
}

/* A 16-bit gradient is summed in f32 and rounded once: bitwise the f32 sum of the same
 * values, cast. 300 ids over 3 rows put 100 additions into each, which rounded to f16 or bf16
 * at every one would lose most of the small terms against the growing sum. */
static void test_embedding_backward_16_bit(void) {
    enum { n_ids = 300, dim = 8 };
    int32_t id_values[n_ids];
    for (int i = 0; i < n_ids; i++) id_values[i] = i % 3;
    gc_tensor *ids = gc_from_host(id_values, GC_SHAPE(n_ids), GC_I32, gc_cpu());
    const gc_dtype narrow[] = {GC_F16, GC_BF16};
    for (int d = 0; d < 2; d++) {
        gc_tensor *grad = gc_test_random(GC_SHAPE(n_ids, dim), narrow[d], 31);
        gc_tensor *grad_f32 = gc_cast(grad, GC_F32), *sum_f32 = gc_embedding_backward(grad_f32, ids, 3);
        gc_tensor *want = gc_cast(sum_f32, narrow[d]), *got = gc_embedding_backward(grad, ids, 3);
        REQUIRE(ids && want && got);
        CHECK(got->dtype == narrow[d]);
        char what[64];
        snprintf(what, sizeof what, "embedding_backward %s: the f32 sum rounded once", gc_dtype_name(narrow[d]));
        gc_test_expect_close(want, got, 0, 0, what);
        RELEASE(grad, grad_f32, sum_f32, want, got);
    }
    gc_tensor_release(ids);
}

/* --- permute and transpose --- */

static void test_permute(void) {
    /* 2-D: x [2, 3] = [[0, 1, 2], [3, 4, 5]] -> [3, 2] */
    gc_tensor *x2 = counting(GC_F32, GC_SHAPE(2, 3));
    expect(gc_permute(x2, (const int[]){1, 0}), GC_SHAPE(3, 2), (const double[]){0, 3, 1, 4, 2, 5}, "permute 2-D");
    expect(gc_permute(x2, (const int[]){0, 1}), GC_SHAPE(2, 3), (const double[]){0, 1, 2, 3, 4, 5},
           "permute identity");

    /* 3-D: x [2, 2, 3], x[i][j][k] = 6i + 3j + k; perm (2, 0, 1): out[k][i][j] = x[i][j][k] */
    gc_tensor *x3 = counting(GC_F32, GC_SHAPE(2, 2, 3));
    expect(gc_permute(x3, (const int[]){2, 0, 1}), GC_SHAPE(3, 2, 2),
           (const double[]){0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}, "permute 3-D (2, 0, 1)");

    /* 4-D head split: x [B=2, T=3, H=2, Dh=2] = 12b + 4t + 2h + d -> [B, H, T, Dh] */
    gc_tensor *x4 = counting(GC_F32, GC_SHAPE(2, 3, 2, 2));
    const double heads[24] = {0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11, 12, 13, 16, 17, 20, 21, 14, 15, 18, 19, 22, 23};
    expect(gc_permute(x4, (const int[]){0, 2, 1, 3}), GC_SHAPE(2, 2, 3, 2), heads, "permute 4-D (0, 2, 1, 3)");
    /* 4-D moving the last dim: (3, 0, 1, 2) on [1, 2, 2, 3] = 6j + 3k + l: out[l][0][j][k] */
    gc_tensor *x4b = counting(GC_F32, GC_SHAPE(1, 2, 2, 3));
    expect(gc_permute(x4b, (const int[]){3, 0, 1, 2}), GC_SHAPE(3, 1, 2, 2),
           (const double[]){0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}, "permute 4-D (3, 0, 1, 2)");

    /* Every element size: 2 (f16), 4 (i32), 8 (f64). */
    const gc_dtype dtypes[] = {GC_F16, GC_BF16, GC_I32, GC_F64};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        gc_tensor *x = counting(dtypes[i], GC_SHAPE(2, 3));
        gc_tensor *y = gc_permute(x, (const int[]){1, 0});
        REQUIRE(y);
        CHECK(y->dtype == dtypes[i]);
        expect(y, GC_SHAPE(3, 2), (const double[]){0, 3, 1, 4, 2, 5}, gc_dtype_name(dtypes[i]));
        gc_tensor_release(x);
    }

    /* A 0-dim tensor has the empty permutation; a slice is read from its offset. */
    gc_tensor *scalar = gc_test_tensor(GC_F32, 0, NULL, (const double[]){5});
    expect(gc_permute(scalar, NULL), 0, NULL, (const double[]){5}, "permute 0-dim");
    gc_tensor *rows = gc_slice0(x3, 1, 2); /* [1, 2, 3] = 6 .. 11 */
    expect(gc_permute(rows, (const int[]){2, 1, 0}), GC_SHAPE(3, 2, 1), (const double[]){6, 9, 7, 10, 8, 11},
           "permute of a slice");
    CHECK(gc_permute(NULL, (const int[]){0}) == NULL);
    RELEASE(x2, x3, x4, x4b, scalar, rows);
}

static void test_transpose(void) {
    /* x [2, 2, 3] = 6i + 3j + k; dims (-1, -2) swap the last two: out[i][k][j] */
    gc_tensor *x = counting(GC_F32, GC_SHAPE(2, 2, 3));
    const double swapped[12] = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
    expect(gc_transpose(x, -1, -2), GC_SHAPE(2, 3, 2), swapped, "transpose (-1, -2)");
    expect(gc_transpose(x, 1, 2), GC_SHAPE(2, 3, 2), swapped, "transpose (1, 2)");
    expect(gc_transpose(x, 0, -1), GC_SHAPE(3, 2, 2), (const double[]){0, 6, 3, 9, 1, 7, 4, 10, 2, 8, 5, 11},
           "transpose (0, -1)");
    expect(gc_transpose(x, 1, 1), GC_SHAPE(2, 2, 3), (const double[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
           "transpose of a dim with itself");
    CHECK(gc_transpose(NULL, 0, 1) == NULL);
    gc_tensor_release(x);
}

static void permute_repeated(void *arg) {
    (void)arg;
    gc_permute(gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu()), (const int[]){0, 0});
}
static void permute_out_of_range(void *arg) {
    (void)arg;
    gc_permute(gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu()), (const int[]){1, 2});
}
static void transpose_out_of_range(void *arg) {
    (void)arg;
    gc_transpose(gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu()), 0, -3);
}

static void test_permute_errors(void) {
    gc_test_expect_fatal(permute_repeated, NULL, "permute: (0, 0) is not a permutation of the dims of [2, 3] f32 cpu");
    gc_test_expect_fatal(permute_out_of_range, NULL, "permute: (1, 2) is not a permutation");
    gc_test_expect_fatal(transpose_out_of_range, NULL, "transpose: dim -3 out of range for [2, 3] f32 cpu");
}

/* --- cat0 --- */

static void test_cat0(void) {
    gc_tensor *a = counting(GC_F32, GC_SHAPE(2, 2));                /* [[0, 1], [2, 3]] */
    gc_tensor *none = gc_zeros(GC_SHAPE(0, 2), GC_F32, gc_cpu());   /* no rows */
    gc_tensor *b = gc_test_tensor(GC_F32, GC_SHAPE(1, 2), (const double[]){7, 8});
    expect(gc_cat0((gc_tensor *const[]){a, none, b}, 3), GC_SHAPE(3, 2), (const double[]){0, 1, 2, 3, 7, 8},
           "cat0 of three, one empty");
    expect(gc_cat0((gc_tensor *const[]){b}, 1), GC_SHAPE(1, 2), (const double[]){7, 8}, "cat0 of one");

    /* Views are copied from their offsets: rows 1 of a, then a again. */
    gc_tensor *row1 = gc_slice0(a, 1, 2);
    expect(gc_cat0((gc_tensor *const[]){row1, a}, 2), GC_SHAPE(3, 2), (const double[]){2, 3, 0, 1, 2, 3},
           "cat0 of a slice");
    /* 1-D and f16: byte offsets of 2-byte elements */
    gc_tensor *h1 = gc_test_tensor(GC_F16, GC_SHAPE(3), (const double[]){1, 2, 3});
    gc_tensor *h2 = gc_test_tensor(GC_F16, GC_SHAPE(2), (const double[]){-1, 0.5});
    expect(gc_cat0((gc_tensor *const[]){h1, h2}, 2), GC_SHAPE(5), (const double[]){1, 2, 3, -1, 0.5}, "cat0 f16 1-D");

    CHECK(gc_cat0((gc_tensor *const[]){a, NULL}, 2) == NULL);
    RELEASE(a, none, b, row1, h1, h2);
}

static void cat0_trailing_mismatch(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(GC_SHAPE(2, 2), GC_F32, gc_cpu()), *b = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_cat0((gc_tensor *const[]){a, b}, 2);
}
static void cat0_dtype_mismatch(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(GC_SHAPE(2, 2), GC_F32, gc_cpu()), *b = gc_zeros(GC_SHAPE(1, 2), GC_F64, gc_cpu());
    gc_cat0((gc_tensor *const[]){a, b}, 2);
}
static void cat0_scalar(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(0, NULL, GC_F32, gc_cpu());
    gc_cat0((gc_tensor *const[]){a}, 1);
}
static void cat0_none(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu());
    gc_cat0((gc_tensor *const[]){a}, 0);
}

static void test_cat0_errors(void) {
    gc_test_expect_fatal(cat0_trailing_mismatch, NULL, "cat0: tensor 1 is [2, 3] f32 cpu, tensor 0 is [2, 2] f32 cpu");
    gc_test_expect_fatal(cat0_dtype_mismatch, NULL, "cat0: tensor 1 is [1, 2] f64 cpu, tensor 0 is [2, 2] f32 cpu");
    gc_test_expect_fatal(cat0_scalar, NULL, "cat0: tensor 0 is [] f32 cpu");
    gc_test_expect_fatal(cat0_none, NULL, "cat0: needs an array of at least one tensor, got 0");
}

/* --- cast --- */

static void cast_unknown_dtype(void *arg) {
    (void)arg;
    gc_cast(gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu()), GC_DTYPE_COUNT);
}

static void test_cast(void) {
    /* f32 -> f16 -> f32: 0.1 becomes the nearest f16, 0x2e66 = 0.0999755859375; 65504
     * (the largest f16) and 2^-24 (the smallest subnormal) survive. */
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){1.5, (float)0.1, 65504, 0x1p-24});
    gc_tensor *h = gc_cast(x, GC_F16);
    REQUIRE(h);
    CHECK(h->dtype == GC_F16);
    gc_tensor *back = gc_cast(h, GC_F32);
    REQUIRE(back);
    CHECK(back->dtype == GC_F32);
    expect(back, GC_SHAPE(4), (const double[]){1.5, 0.0999755859375, 65504, 0x1p-24}, "f32 -> f16 -> f32");

    /* f32 -> i32 truncates toward zero. */
    gc_tensor *fractions = gc_test_tensor(GC_F32, GC_SHAPE(2, 2), (const double[]){1.75, -1.75, 2.5, -0.5});
    gc_tensor *ints = gc_cast(fractions, GC_I32);
    REQUIRE(ints);
    CHECK(ints->dtype == GC_I32);
    gc_tensor *want_ints = gc_test_tensor(GC_F64, GC_SHAPE(2, 2), (const double[]){1, -1, 2, 0});
    gc_test_expect_close(want_ints, ints, 0, 0, "f32 -> i32 truncates");
    gc_tensor_release(want_ints);

    /* f32 -> bf16: 0.1f = 1.1001100|11001...b x 2^-4 rounds up to 1.1001101b x 2^-4. A
     * slice is read from its offset; i32 -> f32 is exact. */
    gc_tensor *tail = gc_slice0(x, 1, 2);
    REQUIRE(tail);
    expect(gc_cast(tail, GC_BF16), GC_SHAPE(1), (const double[]){0.10009765625}, "f32 slice -> bf16");
    expect(gc_cast(ints, GC_F32), GC_SHAPE(2, 2), (const double[]){1, -1, 2, 0}, "i32 -> f32");

    /* Same dtype: an equal copy with its own storage, so writing it leaves x alone. */
    gc_tensor *copy = gc_cast(x, GC_F32);
    REQUIRE(copy);
    CHECK(copy->storage != x->storage);
    gc_test_expect_close(x, copy, 0, 0, "same-dtype cast copies the values");
    gc_tensor *zeros = gc_zeros_like(x);
    REQUIRE(zeros);
    CHECK(gc_copy_(copy, zeros) == GC_OK);
    double original[4];
    gc_to_host_f64(x, original);
    CHECK(original[0] == 1.5 && original[2] == 65504);

    CHECK(gc_cast(NULL, GC_F16) == NULL);
    RELEASE(x, h, fractions, ints, tail, copy, zeros);
    gc_test_expect_fatal(cast_unknown_dtype, NULL, "cast: unknown dtype 5");
}

int main(void) {
    test_embedding();
    test_embedding_errors();
    test_embedding_backward();
    test_embedding_backward_16_bit();
    test_permute();
    test_transpose();
    test_permute_errors();
    test_cat0();
    test_cat0_errors();
    test_cast();
    return gc_test_result();
}
