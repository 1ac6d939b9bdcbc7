/* Test helpers shared by the op tests: CPU tensors from hand-written values, and checks
 * of a result against hand-computed ones. */
#ifndef GC_TESTS_VALUES_H
#define GC_TESTS_VALUES_H

#include "check.h"

/* A CPU tensor of `dtype` and `shape` holding `values` (numel of them), each rounded to
 * dtype (f16 and bf16 through f32); tests pick values the dtype holds exactly unless
 * the rounding is what they test. */
static inline gc_tensor *gc_test_tensor(gc_dtype dtype, int ndim, const int64_t *shape, const double *values) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    size_t size = gc_dtype_size(dtype);
    unsigned char *host = malloc(size * (size_t)(numel ? numel : 1));
    REQUIRE(host);
    for (int64_t i = 0; i < numel; i++) {
        float f32 = (float)values[i];
        int32_t i32 = (int32_t)values[i];
        uint16_t half = dtype == GC_F16 ? gc_f32_to_f16(f32) : gc_f32_to_bf16(f32);
        const void *element = dtype == GC_F32   ? (const void *)&f32
                              : dtype == GC_F64 ? (const void *)&values[i]
                              : dtype == GC_I32 ? (const void *)&i32
                                                : (const void *)&half;
        memcpy(host + (size_t)i * size, element, size);
    }
    gc_tensor *t = gc_from_host(host, ndim, shape, dtype, gc_cpu());
    REQUIRE(t);
    free(host);
    return t;
}

/* Checks that `got` exists, has `dtype` and `shape`, and holds `want`: each element
 * within atol + rtol |want|, nan exactly where want is nan (0, 0 asks for equality). */
static inline void gc_test_expect_values(const gc_tensor *got, gc_dtype dtype, int ndim, const int64_t *shape,
                                         const double *want, double atol, double rtol, const char *what) {
    CHECK_MSG(got != NULL, "%s: no result (%s)", what, gc_last_error());
    if (!got) return;
    CHECK_MSG(got->dtype == dtype, "%s: dtype %s, want %s", what, gc_dtype_name(got->dtype), gc_dtype_name(dtype));
    gc_tensor *expected = gc_test_tensor(GC_F64, ndim, shape, want);
    gc_test_expect_close(expected, got, atol, rtol, what);
    gc_tensor_release(expected);
}

#endif
