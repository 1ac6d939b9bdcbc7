/* gc_matmul on CUDA (cuBLAS) against the CPU kernel, for every float dtype, transpose
 * combination, batched and odd shapes, and k = 0; gc_matmul_bias on the 2-D shapes (its
 * bias one more term of the sum: the bound of k + 1).
 *
 * Tolerance. Inputs are uniform in [-1, 1), so a product has variance 1/9 and a
 * partial sum s_p of p products an rms of sqrt(p / 9). The CPU sums each element in
 * order; each addition rounds by up to half an ulp of s_p, an ulp being between u and
 * 2u times |s_p| (u: the unit roundoff of the accumulation), which is a random error
 * of variance about u^2 s_p^2 / 4. Summed over p = 1..k that is a standard deviation
 * of about u sqrt(k^2 / 72) ~ u k / 8. cuBLAS sums in blocks and trees, with smaller
 * errors (and fused multiply-adds, which skip the product rounding). Over the ~10^4
 * elements of one comparison the largest difference stays near 4 standard
 * deviations, u k / 2, so
 *
 *     atol = 4 u k,   u = 2^-24 (f32, f16, bf16 accumulate in f32), 2^-53 (f64)
 *
 * leaves a margin of 8, and still catches TF32 (inputs rounded to 11 significant bits:
 * errors of about 2^-11 sqrt(k) / 4, some 40 times atol at k = 129) or any indexing
 * mistake (errors of order 1). The products of f16 or bf16 inputs are exact in f32, so
 * there the two sides differ only in the order of the f32 sums, which each then round
 * once to the dtype: they may land one ulp apart where the sums straddle a rounding
 * boundary, so rtol is gc_test_tolerance(dtype), two ulps of the dtype, and atol has a
 * factor 16 instead of 4 because tensor cores may align and truncate the addends of
 * their f32 accumulation. */
#include "check.h"
#include "tensor/op_internal.h"

static const gc_dtype dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};

static double atol_for(gc_dtype dtype, int64_t k) {
    switch (dtype) {
    case GC_F64: return 4 * 0x1p-53 * (double)k;
    case GC_F32: return 4 * 0x1p-24 * (double)k;
    default: return 16 * 0x1p-24 * (double)k;
    }
}

static double rtol_for(gc_dtype dtype) {
    return dtype == GC_F16 || dtype == GC_BF16 ? gc_test_tolerance(dtype) : 0;
}

/* op(a) [m, k] @ op(b) [k, n] for `batch` matrices (batch 0: 2-D) on both devices. */
static void compare(gc_dtype dtype, int64_t batch, int64_t m, int64_t k, int64_t n, bool ta, bool tb,
                    uint64_t seed) {
    int64_t a_shape[3] = {batch, ta ? k : m, ta ? m : k}, b_shape[3] = {batch, tb ? n : k, tb ? k : n};
    int ndim = batch ? 3 : 2;
    gc_tensor *a = gc_test_random(ndim, a_shape + !batch, dtype, seed);
    gc_tensor *b = gc_test_random(ndim, b_shape + !batch, dtype, seed + 1);
    gc_tensor *a_gpu = gc_to_device(a, gc_cuda(0)), *b_gpu = gc_to_device(b, gc_cuda(0));
    gc_tensor *want = gc_matmul(a, b, ta, tb), *got = gc_matmul(a_gpu, b_gpu, ta, tb);
    REQUIRE(a_gpu && b_gpu && want && got);
    CHECK(got->device.type == GC_DEVICE_CUDA && got->dtype == dtype);
    char what[128];
    snprintf(what, sizeof what, "%s batch %lld [%lld x %lld @ %lld] trans_a=%d trans_b=%d",
             gc_dtype_name(dtype), (long long)batch, (long long)m, (long long)k, (long long)n, ta, tb);
    gc_test_expect_close(want, got, atol_for(dtype, k), rtol_for(dtype), what);
    if (!batch) {
        gc_tensor *bias = gc_test_random(1, &n, dtype, seed + 2), *bias_gpu = gc_to_device(bias, gc_cuda(0));
        gc_tensor *want_biased = gc_matmul_bias(a, b, bias, ta, tb);
        gc_tensor *got_biased = gc_matmul_bias(a_gpu, b_gpu, bias_gpu, ta, tb);
        REQUIRE(bias_gpu && want_biased && got_biased);
        snprintf(what, sizeof what, "matmul_bias %s [%lld x %lld @ %lld] trans_a=%d trans_b=%d", gc_dtype_name(dtype),
                 (long long)m, (long long)k, (long long)n, ta, tb);
        gc_test_expect_close(want_biased, got_biased, atol_for(dtype, k + 1), rtol_for(dtype), what);
        RELEASE(bias, bias_gpu, want_biased, got_biased);
    }
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(a_gpu);
    gc_tensor_release(b_gpu);
    gc_tensor_release(want);
    gc_tensor_release(got);
}

/* k = 0: an empty sum, zeros (cuBLAS is not called; c must still be written). */
static void test_k_zero(void) {
    for (int d = 0; d < 4; d++) {
        gc_tensor *a = gc_zeros(GC_SHAPE(2, 5, 0), dtypes[d], gc_cuda(0));
        gc_tensor *b = gc_zeros(GC_SHAPE(2, 0, 7), dtypes[d], gc_cuda(0));
        gc_tensor *want = gc_zeros(GC_SHAPE(2, 5, 7), dtypes[d], gc_cpu());
        REQUIRE(a && b && want);
        /* Fill the allocator's cache with non-zero blocks of the output's size first, so
         * that a kernel which forgot to write c would be caught. */
        gc_tensor *junk = gc_full(GC_SHAPE(2, 5, 7), dtypes[d], gc_cuda(0), 3.0);
        REQUIRE(junk);
        gc_tensor_release(junk);
        gc_tensor *got = gc_matmul(a, b, false, false);
        REQUIRE(got);
        gc_test_expect_close(want, got, 0, 0, "k = 0");
        gc_tensor_release(a);
        gc_tensor_release(b);
        gc_tensor_release(want);
        gc_tensor_release(got);
    }
}

/* k = 0 with beta = 1 (c = c + an empty sum): gc_matmul_bias, whose c starts as the bias
 * rows, and gc_matmul_into accumulating, which leaves c as it was. Both scale c by 1 on the
 * device (the k = 0 path's multiply), and must leave it bitwise as the CPU does. */
static void test_k_zero_accumulating(void) {
    for (int d = 0; d < 4; d++) {
        gc_dtype dtype = dtypes[d];
        gc_tensor *a = gc_zeros(GC_SHAPE(5, 0), dtype, gc_cpu()), *b = gc_zeros(GC_SHAPE(0, 7), dtype, gc_cpu());
        gc_tensor *bias = gc_test_random(GC_SHAPE(7), dtype, 40 + (uint64_t)d);
        gc_tensor *c = gc_test_random(GC_SHAPE(5, 7), dtype, 50 + (uint64_t)d);
        REQUIRE(a && b && bias && c);
        gc_tensor *a_gpu = gc_to_device(a, gc_cuda(0)), *b_gpu = gc_to_device(b, gc_cuda(0));
        gc_tensor *bias_gpu = gc_to_device(bias, gc_cuda(0)), *c_gpu = gc_to_device(c, gc_cuda(0));
        REQUIRE(a_gpu && b_gpu && bias_gpu && c_gpu);
        gc_tensor *want = gc_matmul_bias(a, b, bias, false, false), *got = gc_matmul_bias(a_gpu, b_gpu, bias_gpu, false, false);
        REQUIRE(want && got);
        gc_test_expect_close(want, got, 0, 0, "matmul_bias with k = 0: the bias rows");
        gc_matmul_into(c, a, b, false, false, true);
        gc_matmul_into(c_gpu, a_gpu, b_gpu, false, false, true);
        gc_test_expect_close(c, c_gpu, 0, 0, "matmul_into accumulating with k = 0: c unchanged");
        RELEASE(a, b, bias, c, a_gpu, b_gpu, bias_gpu, c_gpu, want, got);
    }
}

/* m or n = 0: an empty result of the right shape. */
static void test_empty_result(void) {
    gc_tensor *a = gc_zeros(GC_SHAPE(0, 3), GC_F32, gc_cuda(0)),
              *b = gc_zeros(GC_SHAPE(3, 4), GC_F32, gc_cuda(0));
    REQUIRE(a && b);
    gc_tensor *c = gc_matmul(a, b, false, false);
    REQUIRE(c);
    CHECK(c->ndim == 2 && c->shape[0] == 0 && c->shape[1] == 4);
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(c);
}

typedef struct device_case {
    gc_tensor *a, *b;
} device_case;

static void run_matmul(void *arg) {
    const device_case *c = arg;
    gc_matmul(c->a, c->b, false, false);
}

static void test_different_devices(void) {
    device_case c = {gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu()),
                     gc_zeros(GC_SHAPE(3, 2), GC_F32, gc_cuda(0))};
    REQUIRE(c.a && c.b);
    gc_test_expect_fatal(run_matmul, &c,
                         "matmul: inputs on different devices: [2, 3] f32 cpu and [3, 2] f32 cuda:0");
    gc_tensor_release(c.a);
    gc_tensor_release(c.b);
}

int main(void) {
    gc_test_require_cuda();
    /* batch, m, k, n: single elements, odd sizes that leave partial tiles everywhere, a
     * row of 4097 columns, and batches. */
    const int64_t shapes[][4] = {{0, 1, 1, 1},     {0, 7, 33, 5},   {0, 257, 129, 65},
                                 {0, 3, 17, 4097}, {3, 33, 65, 17}, {5, 64, 64, 64}};
    uint64_t seed = 100;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 4; d++)
            for (int flags = 0; flags < 4; flags++)
                compare(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], flags & 1,
                        flags & 2, seed += 2);
    test_k_zero();
    test_k_zero_accumulating();
    test_empty_result();
    test_different_devices();
    return gc_test_result();
}
