/* Dropout on CUDA gives the CPU's bytes: every float dtype; sizes that end inside a Philox
 * block; offsets that start inside a block (so the kernel's groups are not aligned with the
 * elements) or use the counter's high word; one draw past a single pass of the capped grid
 * (8192 blocks x 256 threads x 4 elements); and the gradient of f32 dropout. */
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

    gc_tensor *x = gc_test_random(GC_SHAPE(33, 129), GC_F32, 1), *g = gc_test_random(GC_SHAPE(33, 129), GC_F32, 2);
    gc_tensor *want = dropout_gradient(x, g, gc_cpu()), *got = dropout_gradient(x, g, gc_cuda(0));
    gc_test_expect_same_bytes(want, got, "f32 dropout gradient");
    gc_tensor_release(x);
    gc_tensor_release(g);
    gc_tensor_release(want);
    gc_tensor_release(got);
    return gc_test_result();
}
