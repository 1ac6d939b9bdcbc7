/* Bitwise comparison of tensors, for results that must be reproduced exactly (a replayed
 * random draw, a CUDA kernel against the CPU's). */
#ifndef GC_TESTS_SAME_BYTES_H
#define GC_TESTS_SAME_BYTES_H

#include "check.h"

/* The index of the first element whose bytes differ between a and b (one shape and
 * dtype, any devices), or -1 when every element's bytes match. */
static inline int64_t gc_test_first_byte_difference(const gc_tensor *a, const gc_tensor *b) {
    size_t nbytes = gc_nbytes(a), size = gc_dtype_size(a->dtype);
    unsigned char *host_a = malloc(nbytes ? nbytes : 1), *host_b = malloc(nbytes ? nbytes : 1);
    REQUIRE(host_a && host_b);
    gc_copy_to_host(a, host_a);
    gc_copy_to_host(b, host_b);
    int64_t first = -1;
    for (size_t i = 0; i < nbytes / size && first < 0; i++)
        if (memcmp(host_a + i * size, host_b + i * size, size)) first = (int64_t)i;
    free(host_a);
    free(host_b);
    return first;
}

/* Checks that `got` has want's shape, dtype and bytes (so +0 and -0 differ). */
static inline void gc_test_expect_same_bytes(const gc_tensor *want, const gc_tensor *got, const char *what) {
    char tw[128], tg[128];
    bool comparable = want && got && gc_same_shape(want, got) && want->dtype == got->dtype;
    CHECK_MSG(comparable, "%s: want %s, got %s", what, want ? gc_tensor_str(want, tw, sizeof tw) : "NULL",
              got ? gc_tensor_str(got, tg, sizeof tg) : "NULL");
    if (!comparable) return;
    int64_t first = gc_test_first_byte_difference(want, got);
    CHECK_MSG(first < 0, "%s: element %lld differs", what, (long long)first);
}

#endif
