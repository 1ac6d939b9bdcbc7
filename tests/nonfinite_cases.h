/* The cases of the multi-tensor finiteness check (gc_any_nonfinite), shared by the CPU test
 * and the CUDA test: lists of tensors of every floating dtype and of sizes around the
 * 65536-element task of ../tensor/finite_impl.h (empty ones included), holding finite values
 * up to each dtype's extremes, then with one element made inf, -inf or nan at the places
 * where an indexing mistake would miss it: the very first and very last element, either
 * side of a task boundary, right after an empty tensor. */
#ifndef GC_TESTS_NONFINITE_CASES_H
#define GC_TESTS_NONFINITE_CASES_H

#include "check.h"

static const gc_dtype nonfinite_dtypes[4] = {GC_F32, GC_F16, GC_BF16, GC_F64};
/* tensor i has size nonfinite_sizes[i % 7] and dtype nonfinite_dtypes[i % 4]: every pairing */
static const int64_t nonfinite_sizes[7] = {3, 0, 65536, 1, 65537, 7, 131071};

/* The largest finite value and the smallest positive subnormal of a dtype: finite, so the
 * check must not flag them. */
static inline void nonfinite_extremes(gc_dtype dtype, double *largest, double *tiny) {
    switch (dtype) {
    case GC_F16: *largest = 65504; *tiny = ldexp(1, -24); break;
    case GC_BF16: *largest = 0x1.fep127; *tiny = ldexp(1, -133); break;
    case GC_F64: *largest = 0x1.fffffffffffffp1023; *tiny = 0x1p-1074; break;
    default: *largest = 0x1.fffffep127; *tiny = 0x1p-149; break;
    }
}

/* Writes `value` into element `index` of t (any device), rounded into t's dtype (1e6 is inf
 * in f16; inf and nan stay what they are). */
static inline void nonfinite_set(gc_tensor *t, int64_t index, double value) {
    gc_tensor *one = gc_from_host(&value, GC_SHAPE(1), GC_F64, gc_cpu());
    gc_tensor *cast = gc_cast(one, t->dtype);
    gc_tensor *flat = gc_reshape(t, GC_SHAPE(-1));
    gc_tensor *element = gc_slice0(flat, index, index + 1);
    REQUIRE(one && cast && flat && element && gc_copy_(element, cast) == GC_OK);
    RELEASE(one, cast, flat, element);
}

/* `count` finite tensors on `device` (uniform values in [-4, 4), each non-empty one holding
 * its dtype's largest finite value, its negative and its smallest subnormal too). */
static inline gc_tensor **nonfinite_make(int count, gc_device device) {
    gc_tensor **tensors = calloc((size_t)count, sizeof *tensors);
    REQUIRE(tensors);
    for (int i = 0; i < count; i++) {
        gc_dtype dtype = nonfinite_dtypes[i % 4];
        int64_t n = nonfinite_sizes[i % 7];
        gc_tensor *host = gc_test_random_in(GC_SHAPE(n), dtype, -4, 4, 100 + (uint64_t)i);
        tensors[i] = gc_to_device(host, device);
        REQUIRE(tensors[i]);
        gc_tensor_release(host);
        double largest, tiny;
        nonfinite_extremes(dtype, &largest, &tiny);
        const double specials[3] = {largest, -largest, tiny};
        for (int k = 0; k < 3 && k < n; k++) nonfinite_set(tensors[i], n - 1 - k, specials[k]);
    }
    return tensors;
}

static inline void nonfinite_free(gc_tensor **tensors, int count) {
    for (int i = 0; i < count; i++) gc_tensor_release(tensors[i]);
    free(tensors);
}

/* The verdict of gc_any_nonfinite over the list, as 0 or 1 (REQUIREs a result). */
static inline int nonfinite_verdict(gc_tensor *const *tensors, int count) {
    gc_tensor *flag = gc_any_nonfinite(tensors, count);
    REQUIRE(flag);
    CHECK(flag->dtype == GC_I32 && flag->ndim == 0 && gc_device_equal(flag->device, tensors[0]->device));
    int verdict = (int)gc_item(flag);
    gc_tensor_release(flag);
    return verdict;
}

/* A place to plant a bad value: tensor `tensor`, element `index`. */
typedef struct nonfinite_place {
    int tensor;
    int64_t index;
    const char *what;
} nonfinite_place;

/* The places worth testing in a list of `count` tensors (count >= 8), into places; returns
 * how many. */
static inline int nonfinite_places(int count, nonfinite_place *places) {
    int last = count - 1, n = 0;
    places[n++] = (nonfinite_place){0, 0, "the first element"};
    places[n++] = (nonfinite_place){last, nonfinite_sizes[last % 7] - 1, "the last element"};
    places[n++] = (nonfinite_place){2, 65535, "the end of a first task"};
    places[n++] = (nonfinite_place){4, 65536, "the start of a second task"};
    places[n++] = (nonfinite_place){6, 131070, "the last element of a second task"};
    places[n++] = (nonfinite_place){2, 0, "right after an empty tensor"};
    if (nonfinite_sizes[last % 7] == 0) places[1] = (nonfinite_place){last - 1, nonfinite_sizes[(last - 1) % 7] - 1,
                                                                      "the last element"};
    return n;
}

/* For each place and each of inf, -inf and nan: the finite list with that one value planted
 * must give verdict 1, and the clean list 0 before and after. count >= 7. */
static inline void nonfinite_check_all(int count, gc_device device) {
    gc_tensor **tensors = nonfinite_make(count, device);
    CHECK_MSG(nonfinite_verdict(tensors, count) == 0, "%d finite tensors flagged", count);
    nonfinite_place places[8];
    int n_places = nonfinite_places(count, places);
    const double bad[3] = {INFINITY, -INFINITY, NAN};
    for (int p = 0; p < n_places; p++)
        for (int b = 0; b < 3; b++) {
            gc_tensor *t = tensors[places[p].tensor];
            gc_tensor *saved = gc_clone(t);
            REQUIRE(saved);
            nonfinite_set(t, places[p].index, bad[b]);
            CHECK_MSG(nonfinite_verdict(tensors, count) == 1, "%d tensors, %g at %s (tensor %d, %s, element %lld)",
                      count, bad[b], places[p].what, places[p].tensor, gc_dtype_name(t->dtype),
                      (long long)places[p].index);
            REQUIRE(gc_copy_(t, saved) == GC_OK);
            gc_tensor_release(saved);
        }
    CHECK_MSG(nonfinite_verdict(tensors, count) == 0, "%d tensors restored, still flagged", count);
    nonfinite_free(tensors, count);
}

#endif
