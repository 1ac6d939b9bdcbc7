/* The library's gradient check (gc_gradcheck, gradcache/autograd.h) in the tests' calling
 * convention: an op of (inputs, context), and one CHECK per leaf naming the worst element.
 * Its tolerance (1e-7 + 1e-6 |analytic| in f64 with a step of 1e-6) is explained there. */
#ifndef GC_TESTS_GRADCHECK_H
#define GC_TESTS_GRADCHECK_H

#include "check.h"

typedef gc_tensor *(*gc_test_op)(gc_tensor *const *inputs, const void *context);

typedef struct gc_test_call {
    gc_test_op op;
    gc_tensor *const *inputs;
    const void *context;
} gc_test_call;

static inline gc_tensor *gc_test_call_op(void *call) {
    const gc_test_call *c = call;
    return c->op(c->inputs, c->context);
}

/* Checks the gradient op gives `leaf` (an f64 CPU leaf the op reads: one of its inputs, or a
 * parameter of a layer in its context) at every `stride`-th element; one check. */
static inline void gc_test_check_leaf(const char *name, const char *leaf_name, gc_test_op op,
                                      gc_tensor *const *inputs, const void *context, gc_tensor *leaf, int64_t stride) {
    gc_test_call call = {op, inputs, context};
    gc_gradcheck_report r;
    gc_gradcheck_options options = {.stride = stride, .seed = 4242};
    REQUIRE(gc_gradcheck(gc_test_call_op, &call, &leaf, 1, &options, &r) == GC_OK);
    CHECK_MSG(r.failed == 0, "%s: %s: %lld of %lld elements differ, the worst at element %lld: analytic %.12g, "
              "numeric %.12g", name, leaf_name, (long long)r.failed, (long long)r.checked, (long long)r.worst_index,
              r.worst_analytic, r.worst_numeric);
}

/* inputs: f64 CPU leaves; those with requires_grad are checked, every element. */
static inline void gc_test_gradcheck(const char *name, gc_test_op op, gc_tensor *const *inputs, int n_inputs,
                                     const void *context) {
    for (int i = 0; i < n_inputs; i++) {
        if (!gc_requires_grad(inputs[i])) continue;
        char leaf_name[32];
        snprintf(leaf_name, sizeof leaf_name, "input %d", i);
        gc_test_check_leaf(name, leaf_name, op, inputs, context, inputs[i], 1);
    }
}

/* A f64 CPU leaf in [lo, hi) that requires a gradient. */
static inline gc_tensor *gc_test_leaf(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed) {
    gc_tensor *t = gc_uniform(ndim, shape, GC_F64, gc_cpu(), lo, hi, seed, 0);
    REQUIRE(t);
    gc_set_requires_grad(t, true);
    return t;
}

#endif
