/* Dropout on CUDA gives the CPU's bytes: every float dtype; sizes that end inside a Philox
 * block; offsets that start inside a block (so the kernel's groups are not aligned with the
 * elements) or use the counter's high word; one draw past a single pass of the capped grid
 * (8192 blocks x 256 threads x 4 elements); rows dropped at their positions (gc_dropout_rows);
 * and the gradient of f32 dropout. */
#include "same_bytes.h"

static gc_tensor *on_cuda(const gc_tensor *x) {
    gc_tensor *copy = gc_to_device(x, gc_cuda(0));
    REQUIRE(copy);
    return copy;
}

static void expect_same_dropout(int64_t n, gc_dtype dtype, double p, uint64_t seed, uint64_t offset) {
    gc_tensor *x = gc_test_random(1, &n, dtype, 1000 + (uint64_t)n);
    gc_tensor *x_cuda = on_cuda(x);
    gc_tensor *want = gc_dropout(x, p, seed, offset), *got = gc_dropout(x_cuda, p, seed, offset);
    REQUIRE(want && got);
    char what[160];
    snprintf(what, sizeof what, "dropout %s n=%lld p=%g seed=%llx offset=%llx", gc_dtype_name(dtype), (long long)n, p,
             (unsigned long long)seed, (unsigned long long)offset);
    gc_test_expect_same_bytes(want, got, what);
    gc_tensor_release(x);
    gc_tensor_release(x_cuda);
    gc_tensor_release(want);
    gc_tensor_release(got);
}

/* gc_dropout_rows: rows [rows, cols] at positions i + i / 5 * 2 (runs of five, then a gap)
 * and, in the last rows, repeated and out of order; the CPU's bytes. */
static void expect_same_dropout_rows(int64_t rows, int64_t cols, gc_dtype dtype, uint64_t offset) {
    int32_t *values = malloc((size_t)rows * sizeof *values);
    REQUIRE(values);
    for (int64_t i = 0; i < rows; i++) values[i] = (int32_t)(i + i / 5 * 2);
    if (rows >= 3) values[rows - 1] = values[rows - 2] = values[0] + 1;
    gc_tensor *positions = gc_from_host(values, GC_SHAPE(rows), GC_I32, gc_cpu());
    gc_tensor *x = gc_test_random(GC_SHAPE(rows, cols), dtype, 2000 + (uint64_t)cols);
    gc_tensor *positions_cuda = on_cuda(positions), *x_cuda = on_cuda(x);
    gc_tensor *want = gc_dropout_rows(x, positions, 0.1, 0x0fedcba987654321ull, offset);
    gc_tensor *got = gc_dropout_rows(x_cuda, positions_cuda, 0.1, 0x0fedcba987654321ull, offset);
    REQUIRE(want && got);
    char what[160];
    snprintf(what, sizeof what, "dropout_rows %s [%lld, %lld] offset=%llx", gc_dtype_name(dtype), (long long)rows,
             (long long)cols, (unsigned long long)offset);
    gc_test_expect_same_bytes(want, got, what);
    RELEASE(positions, x, positions_cuda, x_cuda, want, got);
    free(values);
}

/* The gradient of y = dropout(x) for the seed g, on `device`. */
static gc_tensor *dropout_gradient(const gc_tensor *x_cpu, const gc_tensor *g_cpu, gc_device device) {
    gc_tensor *x = gc_to_device(x_cpu, device), *g = gc_to_device(g_cpu, device);
    REQUIRE(x && g);
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_dropout(x, 0.3, 42, 5);
    REQUIRE(y && gc_backward(&y, &g, 1) == GC_OK);
    gc_tensor *grad = gc_clone(gc_grad(x));
    REQUIRE(grad);
    gc_tensor_release(x);
    gc_tensor_release(g);
    gc_tensor_release(y);
    return grad;
}

int main(void) {
    gc_test_require_cuda();
    const gc_dtype dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
    const int64_t sizes[] = {1, 5, 4097, 1000000};
    const uint64_t offsets[] = {0, 3, (1ull << 33) + 1};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                expect_same_dropout(sizes[s], dtypes[d], 0.1, 0x123456789abcdef0ull, offsets[o]);
    expect_same_dropout(4097, GC_F32, 0.5, 7, 1);
    expect_same_dropout(4097, GC_BF16, 0.9, 7, 2);
    expect_same_dropout(9000001, GC_F32, 0.3, 7, 3); /* 2250001 groups: more than one grid pass */

    const int64_t row_shapes[][2] = {{1, 1}, {7, 3}, {12, 64}, {1000, 257}, {300000, 9}};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++)
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                expect_same_dropout_rows(row_shapes[s][0], row_shapes[s][1], dtypes[d], offsets[o]);

    gc_tensor *x = gc_test_random(GC_SHAPE(33, 129), GC_F32, 1), *g = gc_test_random(GC_SHAPE(33, 129), GC_F32, 2);
    gc_tensor *want = dropout_gradient(x, g, gc_cpu()), *got = dropout_gradient(x, g, gc_cuda(0));
    gc_test_expect_same_bytes(want, got, "f32 dropout gradient");
    gc_tensor_release(x);
    gc_tensor_release(g);
    gc_tensor_release(want);
    gc_tensor_release(got);
    return gc_test_result();
}
