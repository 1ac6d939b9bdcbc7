/* Memory on a GPU: exact accounting, the caching allocator's reuse, the byte limit, a
 * real out-of-memory that is recoverable, and copies between host and device. */
#include "check.h"

static void test_cache_reuses_blocks(gc_device gpu) {
    gc_memory_empty_cache(gpu);
    gc_memory_stats start = gc_memory_get_stats(gpu);
    gc_tensor *a = gc_zeros(GC_SHAPE(1000), GC_F32, gpu); /* 4000 bytes -> a 4096-byte class */
    REQUIRE(a);
    void *first = gc_data(a);
    gc_memory_stats one = gc_memory_get_stats(gpu);
    CHECK(one.live_bytes == start.live_bytes + 4000);
    CHECK(one.reserved_bytes == start.reserved_bytes + 4096);
    CHECK(one.driver_alloc_count == start.driver_alloc_count + 1);
    gc_tensor_release(a);
    CHECK(gc_memory_get_stats(gpu).live_bytes == start.live_bytes);
    CHECK(gc_memory_get_stats(gpu).reserved_bytes == one.reserved_bytes); /* cached, not freed */

    /* A training loop allocates the same sizes every step: no cudaMalloc after the first. */
    for (int step = 0; step < 100; step++) {
        gc_tensor *b = gc_zeros(GC_SHAPE(1000), GC_F32, gpu);
        REQUIRE(b);
        CHECK(gc_data(b) == first);
        gc_tensor_release(b);
    }
    CHECK(gc_memory_get_stats(gpu).driver_alloc_count == one.driver_alloc_count);
    gc_memory_empty_cache(gpu);
    CHECK(gc_memory_get_stats(gpu).reserved_bytes == start.reserved_bytes);
}

static void test_limit_and_real_oom(gc_device gpu) {
    size_t live = gc_memory_get_stats(gpu).live_bytes;
    gc_memory_set_limit(gpu, live + 4096);
    gc_tensor *over = gc_zeros(GC_SHAPE(1025), GC_F32, gpu);
    CHECK(over == NULL && gc_last_status() == GC_ERR_MEM_LIMIT);
    CHECK(strstr(gc_last_error(), "cuda:0") != NULL);
    gc_memory_set_limit(gpu, 0);

    /* 2^50 bytes exceeds any GPU: cudaMalloc fails, the error is returned, nothing leaks,
     * and the device keeps working. */
    gc_clear_error();
    gc_memory_stats before = gc_memory_get_stats(gpu);
    gc_tensor *huge = gc_empty(GC_SHAPE((int64_t)1 << 48), GC_F32, gpu);
    CHECK(huge == NULL && gc_last_status() == GC_ERR_OUT_OF_MEMORY);
    gc_memory_stats after = gc_memory_get_stats(gpu);
    CHECK(after.live_bytes == before.live_bytes && after.alloc_count == before.alloc_count);
    gc_tensor *small = gc_ones(GC_SHAPE(1), GC_F32, gpu);
    CHECK(small != NULL && gc_item(small) == 1.0);
    gc_tensor_release(small);
    gc_clear_error();
}

static void test_copies(gc_device gpu) {
    const float host[6] = {1, 2, 3, 4, 5, 6};
    gc_tensor *x = gc_from_host(host, GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_tensor *on_gpu = gc_to_device(x, gpu);
    gc_tensor *gpu_copy = gc_clone(on_gpu);              /* device to device */
    gc_tensor *rows = gc_slice0(gpu_copy, 1, 2);         /* a view with an offset */
    gc_tensor *back = gc_to_device(rows, gc_cpu());
    REQUIRE(x && on_gpu && gpu_copy && rows && back);
    CHECK(on_gpu->device.type == GC_DEVICE_CUDA && back->device.type == GC_DEVICE_CPU);
    float out[3];
    gc_copy_to_host(back, out);
    CHECK(out[0] == 4 && out[1] == 5 && out[2] == 6);
    gc_tensor *tensors[] = {x, on_gpu, gpu_copy, rows, back};
    for (int i = 0; i < 5; i++) gc_tensor_release(tensors[i]);
}

/* f32 and f16 everywhere this build runs (sm_53 and up); bf16 needs sm_80 and otherwise is
 * refused with a message naming the device and what it lacks. */
static void test_dtype_support(gc_device gpu) {
    CHECK(gc_device_check_dtype(gpu, GC_F32) == GC_OK && gc_device_check_dtype(gpu, GC_F16) == GC_OK);
    gc_status bf16 = gc_device_check_dtype(gpu, GC_BF16);
    CHECK_MSG(bf16 == GC_OK || (bf16 == GC_ERR_UNAVAILABLE && strstr(gc_last_error(), "cuda:0 (compute capability") &&
                                strstr(gc_last_error(), "does not support bf16, which needs 8.0")),
              "bf16: %s", gc_last_error());
}

int main(void) {
    gc_test_require_cuda();
    gc_device gpu = gc_cuda(0);
    test_dtype_support(gpu);
    test_cache_reuses_blocks(gpu);
    test_limit_and_real_oom(gpu);
    test_copies(gpu);
    CHECK(gc_memory_get_stats(gpu).live_bytes == 0);
    return gc_test_result();
}
