/* A case shared by the cpu and cuda suites (test_memory.c, test_memory_cuda.c): under a byte
 * limit, the block cache holds no more than the limit leaves (tensor/alloc.c). */
#ifndef GC_TESTS_LIMIT_CACHE_CASE_H
#define GC_TESTS_LIMIT_CACHE_CASE_H

#include "check.h"

/* Two steps of 8 tensors, of 6000 bytes (6144-byte blocks) and then of 7000 (7168-byte
 * blocks), under a limit 64 KiB above what the pool holds: the first step's freed blocks
 * stay cached until the second needs their room, so the pool (the workspace aside) never
 * holds more than the limit, where keeping them all would be 104 KiB above the start. The
 * caller turns the cache on. */
static inline void check_limit_bounds_cache(gc_device device) {
    enum { TENSORS = 8 };
    gc_memory_empty_cache(device);
    gc_memory_stats start = gc_memory_get_stats(device);
    size_t held_at_start = start.reserved_bytes - start.workspace_bytes; /* live blocks, rounded */
    size_t limit = held_at_start + 64 * 1024;
    gc_memory_set_limit(device, limit);
    for (int step = 0; step < 2; step++) {
        gc_tensor *tensors[TENSORS];
        for (int i = 0; i < TENSORS; i++) {
            tensors[i] = gc_zeros(GC_SHAPE(1500 + 250 * step), GC_F32, device);
            REQUIRE(tensors[i]);
        }
        gc_memory_stats now = gc_memory_get_stats(device);
        CHECK_MSG(now.reserved_bytes - now.workspace_bytes <= limit, "step %d: the pool holds %zu bytes, limit %zu",
                  step, now.reserved_bytes - now.workspace_bytes, limit);
        for (int i = 0; i < TENSORS; i++) gc_tensor_release(tensors[i]);
    }
    CHECK(gc_memory_get_stats(device).reserved_bytes > start.reserved_bytes); /* the last step's, kept */
    gc_memory_set_limit(device, 0);
    gc_memory_empty_cache(device);
    CHECK(gc_memory_get_stats(device).reserved_bytes == start.reserved_bytes);
}

#endif
