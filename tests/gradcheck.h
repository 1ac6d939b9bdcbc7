/* Finite-difference gradient checking for the autograd tests.
 *
 * For an op f over some inputs, the scalar L = sum(f(inputs) * w), with w a fixed random
 * weight of f's output shape, has dL/dinput = the vector-Jacobian product of f with w:
 * exactly what gc_backward(f(inputs), seed = w) computes. Each element of each input that
 * requires a gradient is then nudged by +-h and the central difference compared.
 *
 * In f64 with h = 1e-6 the truncation error is O(h^2) (~1e-12 times the third derivative)
 * and the rounding error ~ 1e-16 |L| / h (~1e-10 for |L| ~ 1), so agreement within
 * 1e-7 + 1e-6 |analytic| is tight enough to catch any wrong rule (which errs by O(1)) and
 * loose enough never to fail on a right one. Inputs must keep clear of kinks (relu at 0,
 * max ties): the tests choose them so. */
#ifndef GC_TESTS_GRADCHECK_H
#define GC_TESTS_GRADCHECK_H

#include "check.h"

typedef gc_tensor *(*gc_test_op)(gc_tensor *const *inputs, const void *context);

static inline double gc_test_weighted_sum(gc_test_op op, gc_tensor *const *inputs, const void *context,
                                          const gc_tensor *weight) {
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *out = op(inputs, context);
    REQUIRE(out);
    gc_tensor *product = gc_mul(out, weight);
    gc_tensor *total = gc_sum_all(product);
    REQUIRE(total);
    double value = gc_item(total);
    gc_tensor_release(out);
    gc_tensor_release(product);
    gc_tensor_release(total);
    gc_set_grad_enabled(previous);
    return value;
}

/* Runs op and back-propagates a fixed random weight w of its output's shape into every leaf
 * it reaches (whose gradients the caller has zeroed); returns w, for gc_test_compare_grad. */
static inline gc_tensor *gc_test_backward_weighted(const char *name, gc_test_op op, gc_tensor *const *inputs,
                                                   const void *context) {
    gc_tensor *out = op(inputs, context);
    REQUIRE(out);
    CHECK_MSG(gc_requires_grad(out), "%s: output does not require a gradient", name);
    gc_tensor *weight = gc_uniform(out->ndim, out->shape, GC_F64, gc_cpu(), -1, 1, 4242, 0);
    REQUIRE(weight);
    REQUIRE(gc_backward(&out, &weight, 1) == GC_OK);
    gc_tensor_release(out);
    return weight;
}

/* Compares the gradient gc_test_backward_weighted left in `leaf` (a f64 CPU leaf the op
 * reads: one of its inputs, or a parameter of a layer in its context) with the central
 * difference at every `stride`-th element; one check. */
static inline void gc_test_compare_grad(const char *name, const char *leaf_name, gc_test_op op,
                                        gc_tensor *const *inputs, const void *context, const gc_tensor *weight,
                                        gc_tensor *leaf, int64_t stride) {
    gc_tensor *grad = gc_grad(leaf);
    CHECK_MSG(grad != NULL, "%s: %s got no gradient", name, leaf_name);
    if (!grad) return;
    int64_t n = gc_numel(leaf);
    double *x = gc_data(leaf);
    double *analytic = malloc(sizeof(double) * (size_t)(n ? n : 1));
    REQUIRE(analytic);
    gc_to_host_f64(grad, analytic);
    const double h = 1e-6;
    int bad = 0;
    for (int64_t k = 0; k < n; k += stride) {
        double saved = x[k];
        x[k] = saved + h;
        double plus = gc_test_weighted_sum(op, inputs, context, weight);
        x[k] = saved - h;
        double minus = gc_test_weighted_sum(op, inputs, context, weight);
        x[k] = saved;
        double numeric = (plus - minus) / (2 * h);
        if (fabs(numeric - analytic[k]) > 1e-7 + 1e-6 * fabs(analytic[k]) && bad++ < 3)
            fprintf(stderr, "%s: %s element %lld: analytic %.12g, numeric %.12g\n", name, leaf_name, (long long)k,
                    analytic[k], numeric);
    }
    gc_test_checks++;
    if (bad) gc_test_failures++;
    free(analytic);
}

/* inputs: f64 CPU leaves; those with requires_grad are checked, every element. */
static inline void gc_test_gradcheck(const char *name, gc_test_op op, gc_tensor *const *inputs, int n_inputs,
                                     const void *context) {
    for (int i = 0; i < n_inputs; i++) gc_zero_grad(inputs[i]);
    gc_tensor *weight = gc_test_backward_weighted(name, op, inputs, context);
    for (int i = 0; i < n_inputs; i++) {
        if (!gc_requires_grad(inputs[i])) continue;
        char leaf_name[32];
        snprintf(leaf_name, sizeof leaf_name, "input %d", i);
        gc_test_compare_grad(name, leaf_name, op, inputs, context, weight, inputs[i], 1);
    }
    gc_tensor_release(weight);
}

/* A f64 CPU leaf in [lo, hi) that requires a gradient. */
static inline gc_tensor *gc_test_leaf(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed) {
    gc_tensor *t = gc_uniform(ndim, shape, GC_F64, gc_cpu(), lo, hi, seed, 0);
    REQUIRE(t);
    gc_set_requires_grad(t, true);
    return t;
}

#endif
