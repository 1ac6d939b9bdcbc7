/* The random ops on CUDA give bitwise the CPU's numbers for the same (seed, offset):
 * every float dtype, uniform and normal, sizes that end inside a thread's group of 4
 * elements and inside a Philox block, offsets that start inside a block or use the high
 * counter word, seeds that use the high key word, and one draw larger than one pass of
 * the kernel's capped grid (4096 blocks x 256 threads x 4 elements). */
#include "check.h"

/* One draw on `device`; a, b = lo, hi or mean, std. */
static gc_tensor *draw(gc_device device, bool normal, int64_t n, gc_dtype dtype, uint64_t seed,
                       uint64_t offset) {
    gc_tensor *t = normal ? gc_normal(1, &n, dtype, device, 0.5, 2.0, seed, offset)
                          : gc_uniform(1, &n, dtype, device, -3.0, 5.0, seed, offset);
    REQUIRE(t);
    return t;
}

/* CUDA's draw, copied back, has the CPU's bytes. */
static void expect_same_bits(bool normal, int64_t n, gc_dtype dtype, uint64_t seed,
                             uint64_t offset) {
    gc_tensor *cpu = draw(gc_cpu(), normal, n, dtype, seed, offset);
    gc_tensor *cuda = draw(gc_cuda(0), normal, n, dtype, seed, offset);
    gc_tensor *back = gc_to_device(cuda, gc_cpu());
    REQUIRE(back);
    const char *want = gc_data(cpu), *got = gc_data(back);
    size_t size = gc_dtype_size(dtype);
    int64_t first_bad = -1;
    for (int64_t i = 0; i < n && first_bad < 0; i++)
        if (memcmp(want + (size_t)i * size, got + (size_t)i * size, size)) first_bad = i;
    CHECK_MSG(first_bad < 0, "%s %s n=%lld seed=%llx offset=%llx: element %lld differs",
              normal ? "normal" : "uniform", gc_dtype_name(dtype), (long long)n,
              (unsigned long long)seed, (unsigned long long)offset, (long long)first_bad);
    gc_tensor_release(cpu);
    gc_tensor_release(cuda);
    gc_tensor_release(back);
}

int main(void) {
    gc_test_require_cuda();
    const gc_dtype dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
    const int64_t sizes[] = {1, 3, 4, 5, 1000, 4097};
    const uint64_t offsets[] = {0, 1, 7, (1ull << 33) + 3};
    const uint64_t seeds[] = {0, 42, 0x123456789abcdef0ull};
    for (int normal = 0; normal < 2; normal++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++)
                        expect_same_bits(normal, sizes[s], dtypes[d], seeds[k], offsets[o]);
    /* past one pass of the capped grid: the grid-stride loop */
    expect_same_bits(false, 5000001, GC_F32, 7, 3);
    expect_same_bits(true, 5000001, GC_F32, 7, 3);
    return gc_test_result();
}
