/* Every differentiable op's backward rule against central finite differences, in f64 on
 * the CPU (see gradcheck.h for the method and the tolerance). */
#include "gradcheck.h"
#include "values.h"

/* Ops under test, in the gc_test_op shape. `context` carries a small parameter. */
static gc_tensor *op_add(gc_tensor *const *x, const void *c) { (void)c; return gc_add(x[0], x[1]); }
static gc_tensor *op_sub(gc_tensor *const *x, const void *c) { (void)c; return gc_sub(x[0], x[1]); }
static gc_tensor *op_mul(gc_tensor *const *x, const void *c) { (void)c; return gc_mul(x[0], x[1]); }
static gc_tensor *op_div(gc_tensor *const *x, const void *c) { (void)c; return gc_div(x[0], x[1]); }

typedef gc_tensor *(*scalar_fn)(const gc_tensor *, double);
static gc_tensor *op_scalar(gc_tensor *const *x, const void *c) { return (*(const scalar_fn *)c)(x[0], 1.7); }

typedef gc_tensor *(*unary_fn)(const gc_tensor *);
static gc_tensor *op_unary(gc_tensor *const *x, const void *c) { return (*(const unary_fn *)c)(x[0]); }

static gc_tensor *op_expand(gc_tensor *const *x, const void *c) { (void)c; return gc_expand(x[0], GC_SHAPE(2, 3, 4)); }
/* Reduced dims 0 and 2 (moved last), then 0 and 1 (summed in place where the backend can). */
static gc_tensor *op_sum_to(gc_tensor *const *x, const void *c) { (void)c; return gc_sum_to_shape(x[0], GC_SHAPE(3, 1)); }
static gc_tensor *op_sum_to_last(gc_tensor *const *x, const void *c) { (void)c; return gc_sum_to_shape(x[0], GC_SHAPE(4)); }

static gc_tensor *op_matmul(gc_tensor *const *x, const void *c) {
    const bool *flags = c;
    return gc_matmul(x[0], x[1], flags[0], flags[1]);
}

static gc_tensor *op_matmul_bias(gc_tensor *const *x, const void *c) {
    const bool *flags = c;
    return gc_matmul_bias(x[0], x[1], x[2], flags[0], flags[1]);
}

typedef struct { int which; bool keepdim; } reduce_case;
static gc_tensor *op_reduce(gc_tensor *const *x, const void *c) {
    const reduce_case *r = c;
    switch (r->which) {
    case 0: return gc_sum_last(x[0], r->keepdim);
    case 1: return gc_mean_last(x[0], r->keepdim);
    case 2: return gc_max_last(x[0], r->keepdim, NULL);
    case 3: return gc_sum_all(x[0]);
    case 4: return gc_mean_all(x[0]);
    default: return gc_max_all(x[0]);
    }
}

static gc_tensor *op_softmax(gc_tensor *const *x, const void *c) { return *(const bool *)c ? gc_log_softmax(x[0]) : gc_softmax(x[0]); }
static gc_tensor *op_layernorm(gc_tensor *const *x, const void *c) {
    (void)c;
    return gc_layernorm(x[0], x[1], x[2], 1e-5, NULL, NULL);
}
static gc_tensor *op_layernorm_bare(gc_tensor *const *x, const void *c) {
    (void)c;
    return gc_layernorm(x[0], NULL, NULL, 1e-5, NULL, NULL);
}
static gc_tensor *op_embedding(gc_tensor *const *x, const void *c) { return gc_embedding(x[0], c); }
static gc_tensor *op_permute(gc_tensor *const *x, const void *c) { (void)c; return gc_permute(x[0], (const int[]){2, 0, 1}); }
static gc_tensor *op_transpose(gc_tensor *const *x, const void *c) { (void)c; return gc_transpose(x[0], -1, -2); }
static gc_tensor *op_slice(gc_tensor *const *x, const void *c) { (void)c; return gc_slice0(x[0], 1, 2); }
static gc_tensor *op_reshape(gc_tensor *const *x, const void *c) { (void)c; return gc_reshape(x[0], GC_SHAPE(4, -1)); }
static gc_tensor *op_cat(gc_tensor *const *x, const void *c) { (void)c; return gc_cat0(x, 3); }
static gc_tensor *op_cast(gc_tensor *const *x, const void *c) { (void)c; return gc_cast(x[0], GC_F64); }

static void release_all(gc_tensor **tensors, int n) {
    for (int i = 0; i < n; i++) gc_tensor_release(tensors[i]);
}

static void check_binary(void) {
    gc_test_op ops[] = {op_add, op_sub, op_mul, op_div};
    const char *names[] = {"add", "sub", "mul", "div"};
    for (int k = 0; k < 4; k++) {
        /* same shape; a row bias; both sides broadcast ([2,1,3] with [4,1]) */
        gc_tensor *same[] = {gc_test_leaf(GC_SHAPE(3, 4), -1, 1, 1), gc_test_leaf(GC_SHAPE(3, 4), 1, 2, 2)};
        gc_tensor *bias[] = {gc_test_leaf(GC_SHAPE(3, 4), -1, 1, 3), gc_test_leaf(GC_SHAPE(4), 1, 2, 4)};
        gc_tensor *both[] = {gc_test_leaf(GC_SHAPE(2, 1, 3), -1, 1, 5), gc_test_leaf(GC_SHAPE(4, 1), 1, 2, 6)};
        gc_test_gradcheck(names[k], ops[k], same, 2, NULL);
        gc_test_gradcheck(names[k], ops[k], bias, 2, NULL);
        gc_test_gradcheck(names[k], ops[k], both, 2, NULL);
        release_all(same, 2);
        release_all(bias, 2);
        release_all(both, 2);
    }
}

static void check_scalar_and_unary(void) {
    const scalar_fn scalars[] = {gc_add_scalar, gc_mul_scalar, gc_sub_scalar, gc_rsub_scalar, gc_div_scalar, gc_rdiv_scalar};
    for (int k = 0; k < 6; k++) {
        gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 5), 0.5, 2, 10 + (uint64_t)k); /* positive: s / x is smooth */
        gc_test_gradcheck("scalar op", op_scalar, &x, 1, &scalars[k]);
        gc_tensor_release(x);
    }
    const unary_fn unaries[] = {gc_neg, gc_exp, gc_tanh, gc_gelu_tanh, gc_gelu_erf};
    for (int k = 0; k < 5; k++) {
        gc_tensor *x = gc_test_leaf(GC_SHAPE(3, 7), -3, 3, 20 + (uint64_t)k);
        gc_test_gradcheck("unary op", op_unary, &x, 1, &unaries[k]);
        gc_tensor_release(x);
    }
    const unary_fn positive[] = {gc_log, gc_sqrt, gc_rsqrt};
    for (int k = 0; k < 3; k++) {
        gc_tensor *x = gc_test_leaf(GC_SHAPE(3, 7), 0.2, 3, 30 + (uint64_t)k);
        gc_test_gradcheck("unary op on positives", op_unary, &x, 1, &positive[k]);
        gc_tensor_release(x);
    }
    /* relu away from its kink: values in [0.1, 1) with half of them negated */
    const double values[6] = {0.5, -0.3, 0.9, -0.7, 0.1, -0.2};
    gc_tensor *x = gc_from_host(values, GC_SHAPE(2, 3), GC_F64, gc_cpu());
    REQUIRE(x);
    gc_set_requires_grad(x, true);
    const unary_fn relu = gc_relu;
    gc_test_gradcheck("relu", op_unary, &x, 1, &relu);
    gc_tensor_release(x);
}

static void check_matmul(void) {
    for (int case_index = 0; case_index < 4; case_index++) {
        bool flags[2] = {case_index & 1, case_index & 2};
        /* op(a) [3, 4], op(b) [4, 2], stored transposed where the flag says */
        gc_tensor *x[2] = {flags[0] ? gc_test_leaf(GC_SHAPE(4, 3), -1, 1, 40) : gc_test_leaf(GC_SHAPE(3, 4), -1, 1, 40),
                           flags[1] ? gc_test_leaf(GC_SHAPE(2, 4), -1, 1, 41) : gc_test_leaf(GC_SHAPE(4, 2), -1, 1, 41)};
        gc_test_gradcheck("matmul", op_matmul, x, 2, flags);
        gc_tensor *with_bias[3] = {x[0], x[1], gc_test_leaf(GC_SHAPE(2), -1, 1, 44)};
        gc_test_gradcheck("matmul_bias", op_matmul_bias, with_bias, 3, flags);
        gc_tensor_release(with_bias[2]);
        release_all(x, 2);
    }
    bool flags[2] = {false, true};
    gc_tensor *batched[2] = {gc_test_leaf(GC_SHAPE(2, 3, 4), -1, 1, 42), gc_test_leaf(GC_SHAPE(2, 5, 4), -1, 1, 43)};
    gc_test_gradcheck("batched matmul", op_matmul, batched, 2, flags);
    release_all(batched, 2);
}

static void check_reductions(void) {
    for (int which = 0; which < 6; which++)
        for (int keepdim = 0; keepdim < 2; keepdim++) {
            reduce_case r = {which, keepdim};
            /* distinct values (no max ties): a random draw has none */
            gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 3, 5), -1, 1, 50 + (uint64_t)which);
            gc_test_gradcheck("reduction", op_reduce, &x, 1, &r);
            gc_tensor_release(x);
        }
    for (int log = 0; log < 2; log++) {
        bool flag = log;
        gc_tensor *x = gc_test_leaf(GC_SHAPE(3, 6), -2, 2, 60 + (uint64_t)log);
        gc_test_gradcheck("softmax", op_softmax, &x, 1, &flag);
        gc_tensor_release(x);
    }
    gc_tensor *ln[3] = {gc_test_leaf(GC_SHAPE(2, 3, 5), -2, 2, 70), gc_test_leaf(GC_SHAPE(5), 0.5, 1.5, 71),
                        gc_test_leaf(GC_SHAPE(5), -1, 1, 72)};
    gc_test_gradcheck("layernorm", op_layernorm, ln, 3, NULL);
    gc_test_gradcheck("layernorm without affine", op_layernorm_bare, ln, 1, NULL);
    release_all(ln, 3);
    /* rows of 300: the CPU kernels work in chunks of 256 elements, so a row spans two */
    gc_tensor *wide_ln[3] = {gc_test_leaf(GC_SHAPE(2, 300), -2, 2, 73), gc_test_leaf(GC_SHAPE(300), 0.5, 1.5, 74),
                             gc_test_leaf(GC_SHAPE(300), -1, 1, 75)};
    gc_test_gradcheck("layernorm over long rows", op_layernorm, wide_ln, 3, NULL);
    release_all(wide_ln, 3);
}

static void check_layout(void) {
    const int32_t id_values[5] = {2, 0, 2, 3, 2}; /* duplicates accumulate */
    gc_tensor *ids = gc_from_host(id_values, GC_SHAPE(5), GC_I32, gc_cpu());
    gc_tensor *table = gc_test_leaf(GC_SHAPE(4, 3), -1, 1, 80);
    REQUIRE(ids);
    gc_test_gradcheck("embedding", op_embedding, &table, 1, ids);
    gc_tensor_release(table);
    gc_tensor_release(ids);

    gc_tensor *x = gc_test_leaf(GC_SHAPE(2, 3, 4), -1, 1, 81);
    gc_test_gradcheck("permute", op_permute, &x, 1, NULL);
    gc_test_gradcheck("transpose", op_transpose, &x, 1, NULL);
    gc_test_gradcheck("slice0", op_slice, &x, 1, NULL);
    gc_test_gradcheck("reshape", op_reshape, &x, 1, NULL);
    gc_test_gradcheck("cast", op_cast, &x, 1, NULL);
    gc_tensor_release(x);

    gc_tensor *column = gc_test_leaf(GC_SHAPE(3, 1), -1, 1, 82);
    gc_test_gradcheck("expand", op_expand, &column, 1, NULL);
    gc_tensor_release(column);
    gc_tensor *wide = gc_test_leaf(GC_SHAPE(2, 3, 4), -1, 1, 83);
    gc_test_gradcheck("sum_to_shape", op_sum_to, &wide, 1, NULL);
    gc_test_gradcheck("sum_to_shape in place", op_sum_to_last, &wide, 1, NULL);
    gc_tensor_release(wide);

    gc_tensor *parts[3] = {gc_test_leaf(GC_SHAPE(2, 3), -1, 1, 84), gc_test_leaf(GC_SHAPE(0, 3), -1, 1, 85),
                           gc_test_leaf(GC_SHAPE(1, 3), -1, 1, 86)};
    gc_test_gradcheck("cat0", op_cat, parts, 3, NULL);
    release_all(parts, 3);
}

/* --- the check itself (gc_gradcheck) ---
 * sum(x * detach(x)) has the value sum(x^2) but, the detached factor being a constant to
 * backward, the gradient x instead of 2x: the check must fail at every element and name the
 * worst, the one of largest |x| (the output is one element, so the random weight w scales
 * every element alike: |2wx - wx| = |wx| grows faster than the tolerance). A leaf the output
 * does not depend on passes (0 both ways); the stride thins the elements checked. */
static gc_tensor *half_gradient(void *x) {
    gc_tensor *constant = gc_detach(x), *square = gc_mul(x, constant), *total = gc_sum_all(square);
    gc_tensor_release(constant);
    gc_tensor_release(square);
    return total;
}

static void check_the_check(void) {
    gc_tensor *x = gc_test_tensor(GC_F64, GC_SHAPE(5), (const double[]){0.5, -3, 1, 2, -0.25});
    gc_tensor *unused = gc_test_leaf(GC_SHAPE(3), -1, 1, 7);
    gc_set_requires_grad(x, true);
    gc_gradcheck_report r;
    REQUIRE(gc_gradcheck(half_gradient, x, &x, 1, NULL, &r) == GC_OK);
    CHECK(r.checked == 5 && r.failed == 5 && r.worst_leaf == 0 && r.worst_index == 1);
    CHECK_NEAR(r.worst_numeric / r.worst_analytic, 2, 0, 1e-6); /* analytic w x, numeric 2 w x */
    gc_tensor *both[2] = {unused, x};
    REQUIRE(gc_gradcheck(half_gradient, x, both, 2, &(gc_gradcheck_options){.stride = 2}, &r) == GC_OK);
    CHECK(r.checked == 2 + 3 && r.failed == 3 && r.worst_leaf == 1 && r.worst_index == 2);
    REQUIRE(gc_gradcheck(half_gradient, x, &unused, 1, NULL, &r) == GC_OK);
    CHECK(r.checked == 3 && r.failed == 0);
    gc_tensor_release(x);
    gc_tensor_release(unused);
}

int main(void) {
    check_the_check();
    check_binary();
    check_scalar_and_unary();
    check_matmul();
    check_reductions();
    check_layout();
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
