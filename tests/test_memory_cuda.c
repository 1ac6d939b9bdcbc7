/* Memory on a GPU: exact accounting, the library's workspace, the caching allocator's
 * reuse, zero-byte tensors with the cache off, the byte limit, a real out-of-memory that is
 * recoverable, and copies between host and device. */
#include "check.h"
#include "limit_cache_case.h"
#include "tensor/alloc.h"

/* The device's first allocation reserves the library's workspace (the cuBLAS workspace and
 * scratch) with it, counted as reserved but not live; the driver sees at least what the
 * allocator holds. Run first. */
static void test_first_allocation_reserves_workspace(gc_device gpu) {
    gc_memory_stats before = gc_memory_get_stats(gpu);
    CHECK(before.reserved_bytes == 0 && before.workspace_bytes == 0);
    size_t free_before, total;
    gc_memory_device_info(gpu, &free_before, &total);
    gc_tensor *a = gc_zeros(GC_SHAPE(1000), GC_F32, gpu);
    REQUIRE(a);
    gc_memory_stats after = gc_memory_get_stats(gpu);
    /* 32 MiB for cuBLAS on Hopper (4 MiB before), plus under 1 MiB of index slots and scratch */
    CHECK_MSG(after.workspace_bytes >= ((size_t)4 << 20) && after.workspace_bytes < ((size_t)33 << 20),
              "workspace %zu bytes", after.workspace_bytes);
    CHECK(after.live_bytes == 4000);
    CHECK(after.reserved_bytes == after.workspace_bytes + 4096);
    CHECK(after.peak_reserved_bytes == after.reserved_bytes);
    CHECK(after.driver_alloc_count == 2);
    size_t free_after;
    gc_memory_device_info(gpu, &free_after, &total);
    /* signed: device-wide free memory may also grow (no other process may run meanwhile:
     * the test is not parallel, tests/meson.build) */
    int64_t lost = (int64_t)free_before - (int64_t)free_after;
    CHECK_MSG(lost >= (int64_t)after.reserved_bytes, "the driver lost %lld bytes, the allocator holds %zu",
              (long long)lost, after.reserved_bytes);
    CHECK(total > free_after);
    /* cuBLAS computes in the workspace. What the driver loses besides at the first matmul
     * (the handle, cuBLAS's kernels loaded into the context) is printed, not checked: it is
     * the CUDA runtime's, outside any allocator's reach. */
    gc_tensor *m = gc_ones(GC_SHAPE(64, 64), GC_F32, gpu);
    gc_tensor *product = gc_matmul(m, m, false, false);
    gc_tensor *total_value = gc_sum_all(product);
    REQUIRE(m && product && total_value);
    CHECK(gc_item(total_value) == 64.0 * 64 * 64);
    gc_memory_stats with_matmul = gc_memory_get_stats(gpu);
    CHECK(with_matmul.workspace_bytes == after.workspace_bytes);
    size_t free_matmul;
    gc_memory_device_info(gpu, &free_matmul, &total);
    int64_t new_reserved = (int64_t)with_matmul.reserved_bytes - (int64_t)after.reserved_bytes;
    fprintf(stderr, "first matmul: the driver lost %lld bytes beyond the allocator's %lld new reserved bytes\n",
            (long long)((int64_t)free_after - (int64_t)free_matmul - new_reserved), (long long)new_reserved);
    RELEASE(m, product, total_value, a);
}

/* With the cache off, a zero-byte tensor still gets a pointer of its own (cudaMalloc of 0
 * bytes gives NULL, which would read as out of memory), and frees cleanly. */
static void test_zero_bytes_uncached(gc_device gpu) {
    gc_alloc_set_caching(gpu, false);
    gc_tensor *a = gc_empty(GC_SHAPE(0), GC_F32, gpu), *b = gc_zeros(GC_SHAPE(4, 0), GC_F16, gpu);
    CHECK_MSG(a && b, "%s", gc_last_error());
    if (a && b) CHECK(gc_data(a) != NULL && gc_data(b) != NULL && gc_data(a) != gc_data(b));
    gc_tensor *sum = gc_sum_last(b, false); /* [4] of zeros, from empty rows */
    gc_tensor *last = gc_slice0(sum, 3, 4);
    if (last) CHECK(gc_item(last) == 0);
    RELEASE(a, b, sum, last);
    CHECK(gc_memory_get_stats(gpu).live_bytes == 0);
    gc_alloc_set_caching(gpu, true);
}

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
    test_first_allocation_reserves_workspace(gpu);
    test_zero_bytes_uncached(gpu);
    test_cache_reuses_blocks(gpu);
    test_limit_and_real_oom(gpu);
    check_limit_bounds_cache(gpu);
    test_copies(gpu);
    CHECK(gc_memory_get_stats(gpu).live_bytes == 0);
    return gc_test_result();
}
