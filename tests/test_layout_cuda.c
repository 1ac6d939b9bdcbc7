/* CUDA against the CPU: cast, embedding, permute, transpose and cat0, the scatters of the
 * backward rules, and the fatal error of a bad embedding id on CUDA. All but the embedding's
 * backward move or convert values with the same rules on both backends, so those comparisons
 * are exact; the backward's sums have the bound written at test_scatters. */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "reduce_parity.h"
#include "tensor/op_internal.h"

#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

static const gc_dtype float_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
static const gc_dtype all_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64, GC_I32};

static gc_tensor *on_cuda(const gc_tensor *t) {
    gc_tensor *copy = gc_to_device(t, gc_cuda(0));
    REQUIRE(copy);
    return copy;
}


/* Requires `want` (CPU) and `got` (CUDA) to hold the same values, then releases both. */
static void expect_same(gc_tensor *want, gc_tensor *got, const char *what) {
    REQUIRE(want && got);
    CHECK_MSG(got->device.type == GC_DEVICE_CUDA && got->dtype == want->dtype, "%s: result not a CUDA %s tensor",
              what, gc_dtype_name(want->dtype));
    gc_test_expect_close(want, got, 0, 0, what);
    gc_tensor_release(want);
    gc_tensor_release(got);
}

/* --- fatal errors, run first: see main --- */

typedef struct bad_ids {
    int32_t ids[5];
    int count;
} bad_ids;

/* A lookup in a [10, 4] table on CUDA with ids that hold a bad one. The device checks the
 * ids without the host waiting: the error comes at the next synchronisation. */
static void embed_bad_ids(void *arg) {
    const bad_ids *bad = arg;
    int64_t n = bad->count;
    gc_tensor *table = gc_zeros(GC_SHAPE(10, 4), GC_F32, gc_cuda(0));
    gc_tensor *ids = gc_from_host(bad->ids, 1, &n, GC_I32, gc_cuda(0));
    gc_tensor_release(gc_embedding(table, ids));
    gc_device_synchronize(gc_cuda(0));
}

/* The table on CUDA, the ids on the CPU. */
static void embed_across_devices(void *arg) {
    (void)arg;
    const int32_t id = 1;
    gc_tensor *table = gc_zeros(GC_SHAPE(10, 4), GC_F32, gc_cuda(0));
    gc_tensor *ids = gc_from_host(&id, GC_SHAPE(1), GC_I32, gc_cpu());
    gc_tensor_release(gc_embedding(table, ids));
}

static void test_fatal_errors(void) {
    /* The message names the op and the first bad id (at position 2, before -777), as the
     * CPU's does, and says where it was found. */
    bad_ids too_big = {{1, 2, 1000003, 5, -777}, 5};
    gc_test_expect_fatal(embed_bad_ids, &too_big,
                         gc_test_cuda_sync_mode()
                             ? "embedding: id 1000003 at position 2 of ids [5] i32 cuda:0 is outside [0, 10) "
                               "(GC_CUDA_SYNC=1: found at its launch)"
                             : "embedding: id 1000003 at position 2 of ids [5] i32 cuda:0 is outside [0, 10) (found "
                               "at the device's next synchronisation");
    bad_ids negative = {{3, -777, 4}, 3};
    gc_test_expect_fatal(embed_bad_ids, &negative, "-777");
    bad_ids just_past = {{9, 10}, 2}; /* vocab is 10: 9 is the last good id */
    gc_test_expect_fatal(embed_bad_ids, &just_past, "embedding");
    gc_test_expect_fatal(embed_across_devices, NULL, "embedding");
}

/* --- cast --- */

/* Every dtype to every dtype. Values in [-300, 300): fractions that truncate in i32,
 * magnitudes that f16 holds but rounds, and the f64 -> f16 double rounding (through f32)
 * that both backends share. */
static void test_cast_parity(void) {
    const int64_t lengths[] = {0, 1, 7, 4097};
    uint64_t seed = 1;
    for (int s = 0; s < COUNT(all_dtypes); s++)
        for (int d = 0; d < COUNT(all_dtypes); d++)
            for (int l = 0; l < COUNT(lengths); l++) {
                gc_tensor *x = gc_test_random_in(1, &lengths[l], all_dtypes[s], -300, 300, seed++);
                gc_tensor *x_cuda = on_cuda(x);
                char what[96];
                snprintf(what, sizeof what, "cast [%lld] %s -> %s", (long long)lengths[l],
                         gc_dtype_name(all_dtypes[s]), gc_dtype_name(all_dtypes[d]));
                expect_same(gc_cast(x, all_dtypes[d]), gc_cast(x_cuda, all_dtypes[d]), what);
                gc_tensor_release(x);
                gc_tensor_release(x_cuda);
            }
}

/* Casts f32 values on CUDA and checks the results against hand-computed ones. */
static void expect_cast(const float *in, const double *want, int64_t n, gc_dtype dtype, const char *what) {
    gc_tensor *x = gc_from_host(in, 1, &n, GC_F32, gc_cuda(0));
    gc_tensor *expected = gc_from_host(want, 1, &n, GC_F64, gc_cpu());
    REQUIRE(x && expected);
    gc_tensor *y = gc_cast(x, dtype);
    REQUIRE(y);
    gc_test_expect_close(expected, y, 0, 0, what);
    gc_tensor_release(x);
    gc_tensor_release(expected);
    gc_tensor_release(y);
}

static void test_cast_rounding(void) {
    /* f32 -> i32 truncates toward zero, as C does. */
    const float to_int[] = {-2.75f, -0.5f, 0.5f, 2.75f, -1e9f, 123456.9f};
    const double ints[] = {-2, 0, 0, 2, -1e9, 123456};
    expect_cast(to_int, ints, COUNT(to_int), GC_I32, "f32 -> i32 truncation");

    /* f32 -> f16 rounds once to nearest, ties to even: 1 + 2^-11 is halfway between 1
     * and 1 + 2^-10 (odd) and goes down; 1 + 3 * 2^-11 is halfway between 1 + 2^-10
     * (odd) and 1 + 2^-9 and goes up; just above a tie goes up; 2^-25 is halfway between
     * 0 and the smallest subnormal 2^-24 (odd) and goes to 0; 3 * 2^-25 goes up to 2^-23;
     * 65520 is halfway between 65504 (odd) and 2^16, which overflows to inf. */
    const float to_half[] = {1 + 0x1p-11f, 1 + 3 * 0x1p-11f, 1 + 0x1p-11f + 0x1p-20f, 0x1p-25f, 3 * 0x1p-25f,
                             65520.0f,     65519.0f,         -(1 + 0x1p-11f)};
    const double halves[] = {1, 1 + 0x1p-9, 1 + 0x1p-10, 0, 0x1p-23, INFINITY, 65504, -1};
    expect_cast(to_half, halves, COUNT(to_half), GC_F16, "f32 -> f16 ties");

    /* The same for bf16 (7 fraction bits). */
    const float to_bf16[] = {1 + 0x1p-8f, 1 + 3 * 0x1p-8f, 1 + 0x1p-8f + 0x1p-20f};
    const double bf16s[] = {1, 1 + 0x1p-6, 1 + 0x1p-7};
    expect_cast(to_bf16, bf16s, COUNT(to_bf16), GC_BF16, "f32 -> bf16 ties");
}

/* --- embedding --- */

static void expect_embedding_parity(const gc_tensor *table, int ids_ndim, const int64_t *ids_shape,
                                    const int32_t *ids_host) {
    gc_tensor *ids = gc_from_host(ids_host, ids_ndim, ids_shape, GC_I32, gc_cpu());
    REQUIRE(ids);
    gc_tensor *table_cuda = on_cuda(table), *ids_cuda = on_cuda(ids);
    char what[128], tt[64], ti[64];
    snprintf(what, sizeof what, "embedding %s, ids %s", gc_tensor_str(table, tt, sizeof tt),
             gc_tensor_str(ids, ti, sizeof ti));
    expect_same(gc_embedding(table, ids), gc_embedding(table_cuda, ids_cuda), what);
    gc_tensor_release(ids);
    gc_tensor_release(table_cuda);
    gc_tensor_release(ids_cuda);
}

static void test_embedding(void) {
    enum { VOCAB = 50, MANY = 10000 };
    /* ids [3, 5] with duplicates, the first and the last row of the table */
    const int32_t repeated[15] = {0, 49, 3, 3, 17, 0, 49, 25, 25, 25, 8, 1, 49, 0, 3};
    const int32_t single = 7;
    /* more ids than the kernel has blocks (8192), so blocks loop over rows */
    static int32_t many[MANY];
    for (int i = 0; i < MANY; i++) many[i] = (int32_t)((i * 7919) % VOCAB);

    const int64_t dims[] = {1, 7, 33, 4097};
    uint64_t seed = 300;
    for (int t = 0; t < COUNT(float_dtypes); t++)
        for (int d = 0; d < COUNT(dims); d++) {
            int64_t table_shape[2] = {VOCAB, dims[d]};
            gc_tensor *table = gc_test_random_in(2, table_shape, float_dtypes[t], -1, 1, seed++);
            expect_embedding_parity(table, GC_SHAPE(3, 5), repeated);
            expect_embedding_parity(table, 0, NULL, &single); /* a 0-dim id -> [D] */
            expect_embedding_parity(table, GC_SHAPE(0), repeated); /* no ids -> [0, D] */
            if (dims[d] <= 33) expect_embedding_parity(table, GC_SHAPE(MANY), many);
            gc_tensor_release(table);
        }
}

/* --- the scatters of backward rules ---
 * scatter_last moves values: exact. embedding_backward sums each id's rows, k = 200 of them
 * here, in the working type (f32; f64 for f64) in another order on each backend (CUDA's
 * atomics in any order, the CPU's in id order). Each sum of terms in [-1, 1) is within
 * (k - 1) u k of the exact one (Higham, section 4.2), so the two are within 2 k^2 u, and then
 * each rounds once to the stored type: one step of it (gc_test_step_rtol). */
static void test_scatters(void) {
    enum { rows = 300, cols = 9, vocab = 50, n_ids = 10000, dim = 7, per_id = n_ids / vocab };
    static int32_t index_values[rows], id_values[n_ids];
    for (int r = 0; r < rows; r++) index_values[r] = (r * 5) % cols;
    for (int i = 0; i < n_ids; i++) id_values[i] = (int32_t)((i * 7919) % vocab); /* each id 200 times */
    gc_tensor *index = gc_from_host(index_values, GC_SHAPE(rows), GC_I32, gc_cpu());
    gc_tensor *ids = gc_from_host(id_values, GC_SHAPE(n_ids), GC_I32, gc_cpu());
    REQUIRE(index && ids);
    gc_tensor *index_cuda = on_cuda(index), *ids_cuda = on_cuda(ids);
    uint64_t seed = 700;
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        gc_dtype dtype = float_dtypes[d];
        char what[96];
        gc_tensor *src = gc_test_random(GC_SHAPE(rows), dtype, seed++), *src_cuda = on_cuda(src);
        snprintf(what, sizeof what, "scatter_last [%d] -> [%d, %d] %s", rows, rows, cols, gc_dtype_name(dtype));
        expect_same(gc_scatter_last(src, index, cols), gc_scatter_last(src_cuda, index_cuda, cols), what);
        gc_tensor *grad = gc_test_random(GC_SHAPE(n_ids, dim), dtype, seed++), *grad_cuda = on_cuda(grad);
        gc_tensor *want = gc_embedding_backward(grad, ids, vocab), *got = gc_embedding_backward(grad_cuda, ids_cuda, vocab);
        REQUIRE(want && got);
        CHECK(got->dtype == dtype && got->device.type == GC_DEVICE_CUDA);
        snprintf(what, sizeof what, "embedding_backward of %d ids into [%d, %d] %s", n_ids, vocab, dim,
                 gc_dtype_name(dtype));
        double u = dtype == GC_F64 ? 0x1p-53 : 0x1p-24;
        gc_test_expect_close(want, got, 2.0 * per_id * per_id * u, gc_test_step_rtol(dtype), what);
        RELEASE(src, src_cuda, grad, grad_cuda, want, got);
    }
    RELEASE(index, ids, index_cuda, ids_cuda);
}

/* --- permute, transpose, cat0 --- */

static void test_permute(void) {
    const struct {
        int ndim;
        int64_t shape[GC_MAX_DIMS];
        int perm[GC_MAX_DIMS];
    } cases[] = {
        {1, {7}, {0}},
        {2, {7, 33}, {1, 0}},
        {2, {1, 4097}, {1, 0}},
        {2, {0, 7}, {1, 0}},
        {3, {3, 1, 5}, {2, 0, 1}},
        {4, {2, 3, 4, 5}, {3, 1, 0, 2}},
        {4, {2, 7, 3, 33}, {0, 2, 1, 3}}, /* [B, T, H, D] -> [B, H, T, D] */
        {4, {2, 33, 7, 1}, {0, 1, 2, 3}}, /* the identity */
        /* the last dim kept: rows moved in 16-, 8-, 4- or 2-byte vectors as their bytes allow */
        {4, {3, 5, 4, 64}, {0, 2, 1, 3}},
        {4, {3, 5, 2, 6}, {0, 2, 1, 3}},
        {4, {2, 3, 4, 8}, {2, 0, 1, 3}},
        {3, {5, 4, 3}, {1, 0, 2}},
        {2, {9, 2}, {0, 1}},
    };
    uint64_t seed = 700;
    for (int d = 0; d < COUNT(all_dtypes); d++) /* elements of 2, 4 and 8 bytes */
        for (int c = 0; c < COUNT(cases); c++) {
            gc_tensor *x = gc_test_random_in(cases[c].ndim, cases[c].shape, all_dtypes[d], -100, 100, seed++);
            gc_tensor *x_cuda = on_cuda(x);
            char what[96], text[64];
            snprintf(what, sizeof what, "permute %s", gc_tensor_str(x, text, sizeof text));
            expect_same(gc_permute(x, cases[c].perm), gc_permute(x_cuda, cases[c].perm), what);
            if (cases[c].ndim >= 2 && cases[c].shape[0] > 1) {
                /* a view that starts one row in: its rows are not aligned to 16 bytes */
                int64_t rows = cases[c].shape[0];
                gc_tensor *view = gc_slice0(x, 1, rows), *view_cuda = gc_slice0(x_cuda, 1, rows);
                REQUIRE(view && view_cuda);
                snprintf(what, sizeof what, "permute of a view one row into %s", gc_tensor_str(x, text, sizeof text));
                expect_same(gc_permute(view, cases[c].perm), gc_permute(view_cuda, cases[c].perm), what);
                RELEASE(view, view_cuda);
            }
            if (cases[c].ndim >= 2) {
                snprintf(what, sizeof what, "transpose(0, -1) %s", gc_tensor_str(x, text, sizeof text));
                expect_same(gc_transpose(x, 0, -1), gc_transpose(x_cuda, 0, -1), what);
            }
            gc_tensor_release(x);
            gc_tensor_release(x_cuda);
        }
}

static void test_cat0(void) {
    const int64_t rows[] = {2, 0, 5};
    uint64_t seed = 900;
    for (int d = 0; d < COUNT(all_dtypes); d++) {
        gc_tensor *parts[3], *parts_cuda[3];
        for (int i = 0; i < 3; i++) {
            int64_t shape[2] = {rows[i], 33};
            parts[i] = gc_test_random_in(2, shape, all_dtypes[d], -100, 100, seed++);
            parts_cuda[i] = on_cuda(parts[i]);
        }
        char what[64];
        snprintf(what, sizeof what, "cat0 [2|0|5, 33] %s", gc_dtype_name(all_dtypes[d]));
        expect_same(gc_cat0(parts, 3), gc_cat0(parts_cuda, 3), what);
        for (int i = 0; i < 3; i++) {
            gc_tensor_release(parts[i]);
            gc_tensor_release(parts_cuda[i]);
        }
    }
}

int main(void) {
    gc_test_require_cuda_untouched(); /* the fatal-error checks fork: see check.h */
    test_fatal_errors();
    test_cast_parity();
    test_cast_rounding();
    test_embedding();
    test_scatters();
    test_permute();
    test_cat0();
    return gc_test_result();
}
