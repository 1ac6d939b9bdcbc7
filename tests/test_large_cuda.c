/* Sizes past what one pass of a grid covers, against the CPU: more rows than a grid has
 * blocks (row kernels), a few very long rows (split reductions, deterministic), and tensors
 * of more than 2^31 elements, where any 32-bit index arithmetic would wrap. The last part
 * needs about 18 GB of free device memory and is skipped, saying so, without it.
 * Tolerances: sums within reduce_parity.h's bound, softmax and layernorm within
 * norm_parity.h's; everything else moves or rounds values the same way on both backends, so
 * it is compared exactly. */
#include <math.h>

#include "check.h"
#include "norm_parity.h"

static gc_tensor *on_cuda(const gc_tensor *t) { return gc_test_to_cuda(t); }

/* The last `count` elements of a 1-D tensor, as doubles (a view copied to the host). */
static void tail_values(const gc_tensor *x, int64_t count, double *out) {
    gc_tensor *tail = gc_slice0(x, x->shape[0] - count, x->shape[0]);
    REQUIRE(tail);
    gc_to_host_f64(tail, out);
    gc_tensor_release(tail);
}

/* 70001 rows, more than the 65536 blocks of one pass of a row kernel's grid. */
static void test_many_rows(void) {
    const int64_t shape[2] = {70001, 5};
    gc_tensor *x = gc_test_random(2, shape, GC_F32, 1), *x_gpu = on_cuda(x);
    double sum_atol = gc_test_sum_error(5, GC_F32) * 5;
    gc_tensor *want = gc_sum_last(x, false), *got = gc_sum_last(x_gpu, false);
    gc_test_expect_close(want, got, sum_atol, 0x1p-23, "sum_last of 70001 rows");
    RELEASE(want, got);
    gc_tensor *want_index = NULL, *got_index = NULL;
    want = gc_max_last(x, false, &want_index);
    got = gc_max_last(x_gpu, false, &got_index);
    gc_test_expect_close(want, got, 0, 0, "max_last of 70001 rows");
    gc_test_expect_close(want_index, got_index, 0, 0, "argmax of 70001 rows");
    RELEASE(want, got, want_index, got_index);
    /* softmax and layernorm within the bounds norm_parity.h derives; the layernorm's grows with
     * the largest rstd of the 70001 rows (a row of five close values amplifies the rounding of
     * its mean), which a fixed 1e-5 ignored */
    want = gc_softmax(x);
    got = gc_softmax(x_gpu);
    gc_test_tolerance_pair soft = gc_test_softmax_tolerance(5, GC_F32, 2, false);
    gc_test_expect_close(want, got, soft.atol, soft.rtol, "softmax of 70001 rows");
    RELEASE(want, got);
    gc_tensor *want_rstd = NULL, *want_mean = NULL;
    want = gc_layernorm(x, NULL, NULL, 1e-5, &want_mean, &want_rstd);
    got = gc_layernorm(x_gpu, NULL, NULL, 1e-5, NULL, NULL);
    REQUIRE(want && got && want_rstd);
    gc_test_layernorm_tolerance norm = gc_test_layernorm_tolerances(x, NULL, NULL, want_rstd);
    gc_test_expect_close(want, got, norm.y.atol, norm.y.rtol, "layernorm of 70001 rows");
    RELEASE(want, got, want_mean, want_rstd, x, x_gpu);
}

/* A few long rows are split over several blocks each; the result is the CPU's within the
 * sum bound, the first maximum and the first NaN win across segments, and the same sum
 * comes out bit for bit every time. Rows of 5 * 16384 + 7 elements: 5 segments of 16386. */
static void test_split_rows(void) {
    enum { rows = 3, cols = 5 * 16384 + 7 };
    const int64_t shape[2] = {rows, cols};
    gc_tensor *x = gc_test_random(2, shape, GC_F32, 2), *x_gpu = on_cuda(x);
    double sum_atol = gc_test_sum_error(cols, GC_F32) * gc_test_max_row_abs_sum(x);
    gc_tensor *want = gc_sum_last(x, false), *got = gc_sum_last(x_gpu, false), *again = gc_sum_last(x_gpu, false);
    gc_test_expect_close(want, got, sum_atol, 0x1p-23, "sum_last of 3 long rows");
    gc_test_expect_close(got, again, 0, 0, "sum_last of 3 long rows, twice");
    RELEASE(want, got, again, x, x_gpu);

    double *values = calloc((size_t)rows * cols, sizeof *values);
    REQUIRE(values);
    values[70000] = values[40000] = values[16390] = 5; /* segments 4, 2 and 1: 16390 wins */
    values[cols + 80000] = values[cols + 50000] = NAN; /* the first NaN: 50000 */
    values[cols + 10] = INFINITY;
    values[3 * (size_t)cols - 1] = 1; /* row 2: 0 everywhere but 1 at its very end */
    const double want_max[rows] = {5, NAN, 1};
    const int64_t want_at[rows] = {16390, 50000, cols - 1};
    gc_tensor *planted = gc_test_from_doubles(values, 2, shape, GC_F32), *planted_gpu = on_cuda(planted);
    gc_tensor *index = NULL, *max = gc_max_last(planted_gpu, false, &index);
    REQUIRE(max && index);
    double got_max[rows], got_at[rows];
    gc_to_host_f64(max, got_max);
    gc_to_host_f64(index, got_at);
    for (int r = 0; r < rows; r++)
        CHECK_MSG((got_max[r] == want_max[r] || (isnan(got_max[r]) && isnan(want_max[r]))) && got_at[r] == want_at[r],
                  "row %d: max %g at %g, want %g at %lld", r, got_max[r], got_at[r], want_max[r],
                  (long long)want_at[r]);
    RELEASE(planted, planted_gpu, max, index);
    free(values);
}

/* sum_all and mean_all of 2^22 values: split over 256 blocks, within the bound of the CPU,
 * and bitwise the same on every call. */
static void test_sum_all(void) {
    const int64_t n = (int64_t)1 << 22;
    gc_tensor *x = gc_test_random(1, &n, GC_F32, 3), *x_gpu = on_cuda(x);
    double atol = gc_test_sum_error(n, GC_F32) * gc_test_max_row_abs_sum(x);
    gc_tensor *want = gc_sum_all(x), *got = gc_sum_all(x_gpu);
    gc_test_expect_close(want, got, atol, 0x1p-23, "sum_all of 2^22");
    for (int repeat = 0; repeat < 3; repeat++) {
        gc_tensor *again = gc_sum_all(x_gpu);
        gc_test_expect_close(got, again, 0, 0, "sum_all of 2^22, again");
        gc_tensor_release(again);
    }
    RELEASE(want, got);
    want = gc_mean_all(x);
    got = gc_mean_all(x_gpu);
    gc_test_expect_close(want, got, atol / (double)n, 0x1p-22, "mean_all of 2^22");
    RELEASE(want, got, x, x_gpu);
}

/* Elementwise ops, fills, random numbers, dropout, casts, sums and an embedding over more
 * than 2^31 elements: the tail (indices past 2^31) against values computed on the CPU. */
static void test_past_2_31(void) {
    const int64_t n = ((int64_t)1 << 31) + 4099;
    size_t free_bytes = 0, total = 0;
    gc_memory_device_info(gc_cuda(0), &free_bytes, &total);
    if (free_bytes < ((size_t)18 << 30)) {
        fprintf(stderr, "skip part: tensors of 2^31 elements need 18 GB free, the device has %zu bytes\n", free_bytes);
        return;
    }
    double tail[8];
    gc_tensor *ones = gc_full(1, &n, GC_F16, gc_cuda(0), 1.0);
    gc_tensor *threes = gc_mul_scalar(ones, 3);
    gc_tensor *fours = gc_add(ones, threes);
    REQUIRE(fours);
    tail_values(fours, 8, tail);
    for (int i = 0; i < 8; i++) CHECK_MSG(tail[i] == 4, "fill, mul_scalar, add: element n - %d is %g", 8 - i, tail[i]);
    gc_tensor *mean = gc_mean_all(fours);
    REQUIRE(mean);
    CHECK_NEAR(gc_item(mean), 4, 0, 1e-6); /* float partial sums round, a few ulps */
    RELEASE(threes, fours, mean);

    /* dropout and uniform draw element i from Philox word offset + i: their tails are the
     * CPU's draws of 8 elements from word n - 8 on */
    const int64_t eight = 8;
    gc_tensor *dropped = gc_dropout(ones, 0.5, 77, 0);
    gc_tensor *cpu_ones = gc_full(1, &eight, GC_F16, gc_cpu(), 1.0);
    gc_tensor *want_dropped = gc_dropout(cpu_ones, 0.5, 77, (uint64_t)(n - 8));
    REQUIRE(dropped && want_dropped);
    double want[8];
    tail_values(dropped, 8, tail);
    gc_to_host_f64(want_dropped, want);
    for (int i = 0; i < 8; i++) CHECK_MSG(tail[i] == want[i], "dropout element n - %d: %g, want %g", 8 - i, tail[i], want[i]);
    RELEASE(ones, dropped, cpu_ones, want_dropped);
    gc_tensor *uniform = gc_uniform(1, &n, GC_F16, gc_cuda(0), -1, 1, 78, 0);
    gc_tensor *want_uniform = gc_uniform(1, &eight, GC_F16, gc_cpu(), -1, 1, 78, (uint64_t)(n - 8));
    gc_tensor *as_f32 = gc_cast(uniform, GC_F32);
    REQUIRE(uniform && want_uniform && as_f32);
    tail_values(as_f32, 8, tail);
    gc_to_host_f64(want_uniform, want);
    for (int i = 0; i < 8; i++) CHECK_MSG(tail[i] == want[i], "uniform, cast element n - %d: %g, want %g", 8 - i, tail[i], want[i]);
    RELEASE(uniform, want_uniform, as_f32);

    /* an embedding of 2^27 ids into rows of 32: 2^32 output elements; every id 0 but the last */
    const int64_t n_ids = (int64_t)1 << 27;
    gc_tensor *table = gc_test_random(GC_SHAPE(10, 32), GC_F16, 79), *table_gpu = on_cuda(table);
    gc_tensor *ids = gc_zeros(1, &n_ids, GC_I32, gc_cuda(0));
    gc_tensor *last_id = gc_slice0(ids, n_ids - 1, n_ids);
    gc_tensor *seven = gc_full(GC_SHAPE(1), GC_I32, gc_cpu(), 7);
    REQUIRE(table_gpu && ids && last_id && seven && gc_copy_(last_id, seven) == GC_OK);
    gc_tensor *rows = gc_embedding(table_gpu, ids);
    gc_tensor *flat = gc_reshape(rows, GC_SHAPE(n_ids * 32));
    REQUIRE(flat);
    double row[64], table_values[320];
    tail_values(flat, 64, row);
    gc_to_host_f64(table, table_values);
    for (int j = 0; j < 32; j++)
        CHECK_MSG(row[j] == table_values[j] && row[32 + j] == table_values[7 * 32 + j],
                  "embedding past 2^31: column %d", j);
    RELEASE(table, table_gpu, ids, last_id, seven, rows, flat);
    gc_device_synchronize(gc_cuda(0)); /* and no id was reported bad */
}

/* A transpose of [46341, 46341] f16 (2^31 + 92681 elements): y's last rows hold x's last
 * column, which only x's last row fills (with j mod 1024, exact in f16). */
static void test_transpose_past_2_31(void) {
    enum { side = 46341 };
    size_t free_bytes = 0, total = 0;
    gc_memory_device_info(gc_cuda(0), &free_bytes, &total);
    if (free_bytes < ((size_t)10 << 30)) {
        fprintf(stderr, "skip part: a transpose of 2^31 elements needs 10 GB free\n");
        return;
    }
    uint16_t *row_values = malloc(sizeof(uint16_t) * side);
    double *tail = malloc(sizeof(double) * 8 * side);
    REQUIRE(row_values && tail);
    for (int j = 0; j < side; j++) row_values[j] = gc_f32_to_f16((float)(j % 1024));
    gc_tensor *x = gc_zeros(GC_SHAPE(side, side), GC_F16, gc_cuda(0));
    gc_tensor *last_row = gc_slice0(x, side - 1, side);
    gc_tensor *host_row = gc_from_host(row_values, GC_SHAPE(1, side), GC_F16, gc_cpu());
    REQUIRE(x && last_row && host_row && gc_copy_(last_row, host_row) == GC_OK);
    gc_tensor *y = gc_transpose(x, 0, 1);
    gc_tensor *y_tail = gc_slice0(y, side - 8, side);
    REQUIRE(y && y_tail);
    gc_to_host_f64(y_tail, tail);
    for (int r = 0; r < 8; r++)
        CHECK_MSG(tail[(size_t)r * side + side - 1] == (side - 8 + r) % 1024 && tail[(size_t)r * side] == 0,
                  "transpose row %d", side - 8 + r);
    free(row_values);
    free(tail);
    RELEASE(x, last_row, host_row, y, y_tail);
}

int main(void) {
    gc_test_require_cuda();
    test_many_rows();
    test_split_rows();
    test_sum_all();
    test_past_2_31();
    test_transpose_past_2_31();
    CHECK(gc_memory_get_stats(gc_cuda(0)).live_bytes == 0);
    return gc_test_result();
}
