/* CUDA against the CPU: fill, arange, and the unary ops (with the derivatives of backward
 * rules), binary and binary-scalar ops, on random inputs of every supported dtype, odd
 * sizes, broadcast shapes that take the kernel's fast and slow paths, 0-dim and 0-row
 * tensors. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tensor/op_internal.h"

#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

static const gc_dtype float_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
static const gc_dtype all_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64, GC_I32};

typedef struct shape {
    int ndim;
    int64_t dims[GC_MAX_DIMS];
} shape;

/* 0-dim, one element, rows of odd lengths (a partial block, a block and a bit, a grid of
 * 17 blocks), and no rows at all. */
static const shape sizes[] = {
    {0, {0}}, {1, {1}}, {2, {3, 7}}, {2, {2, 33}}, {1, {4097}}, {2, {0, 7}},
};

static gc_tensor *on_cuda(const gc_tensor *t) {
    gc_tensor *copy = gc_to_device(t, gc_cuda(0));
    REQUIRE(copy);
    return copy;
}


/* Compares the CPU's result `want` with CUDA's `got`, then releases both. */
static void expect_parity(gc_tensor *want, gc_tensor *got, double atol, double rtol, const char *what) {
    REQUIRE(want && got);
    CHECK_MSG(got->device.type == GC_DEVICE_CUDA && got->dtype == want->dtype, "%s: result not a CUDA %s tensor",
              what, gc_dtype_name(want->dtype));
    gc_test_expect_close(want, got, atol, rtol, what);
    gc_tensor_release(want);
    gc_tensor_release(got);
}

/* --- fill and arange ---
 * Both backends convert the same double with the same rules (through f32 into f16/bf16,
 * rounding to nearest even; truncation into i32), so the results must be equal. */

static void test_fill(void) {
    /* 1/3 and -2.75 round in every narrow type, 65519 rounds to f16's largest (65504),
     * 1e30 overflows f16 to inf (and is left out for i32, where C leaves it undefined),
     * -7.9 truncates to -7 in i32. */
    const double values[] = {0.0, 1.0, -2.75, 1.0 / 3, 65519.0, 1e30, -7.9};
    const int64_t lengths[] = {0, 1, 7, 4097};
    for (int d = 0; d < COUNT(all_dtypes); d++)
        for (int v = 0; v < COUNT(values); v++)
            for (int l = 0; l < COUNT(lengths); l++) {
                gc_dtype dtype = all_dtypes[d];
                if (dtype == GC_I32 && values[v] > 1e10) continue;
                char what[96];
                snprintf(what, sizeof what, "full(%g) [%lld] %s", values[v], (long long)lengths[l],
                         gc_dtype_name(dtype));
                expect_parity(gc_full(1, &lengths[l], dtype, gc_cpu(), values[v]),
                              gc_full(1, &lengths[l], dtype, gc_cuda(0), values[v]), 0, 0, what);
            }
}

static void test_arange(void) {
    /* -3.3 + i * 0.1 is inexact in double and crosses 0 (truncation toward zero in i32);
     * the CUDA kernel rounds the product and the sum separately, as the CPU does. */
    const struct {
        int64_t n;
        double start, step;
    } cases[] = {{0, 1, 1}, {1, 5.5, 1}, {33, 100, -7.25}, {4097, -3.3, 0.1}};
    for (int d = 0; d < COUNT(all_dtypes); d++)
        for (int c = 0; c < COUNT(cases); c++) {
            char what[96];
            snprintf(what, sizeof what, "arange(%lld, %g, %g) %s", (long long)cases[c].n, cases[c].start,
                     cases[c].step, gc_dtype_name(all_dtypes[d]));
            expect_parity(gc_arange(cases[c].n, cases[c].start, cases[c].step, all_dtypes[d], gc_cpu()),
                          gc_arange(cases[c].n, cases[c].start, cases[c].step, all_dtypes[d], gc_cuda(0)), 0,
                          0, what);
        }
}

/* --- unary ---
 * CUDA's expf, logf, tanhf, erff and rsqrtf are within 2 ulp of the exact value (CUDA
 * C Programming Guide, "Mathematical Functions"; sqrtf is exact) and glibc's within 1-2
 * ulp, so the backends differ by at most ~4 f32 ulps, 5e-7 relative: inside
 * gc_test_tolerance (f16 and bf16 are computed in f32, then may round to neighbouring
 * values: one ulp, also inside it). The gelus need more near x = -4, where t = tanh(.)
 * or erf(.) is close to -1 and 1 + t cancels to ~1e-4: the backends' t differ by up to
 * 4 ulps of t (2^-24 = 6e-8 each), which become an absolute error of |x| / 2 * 4 * 6e-8
 * = 5e-7 on a result of ~1e-4, hence atol 1e-6 (and 1e-14 for f64, whose ulps are 2^-29
 * times smaller). The same atol covers f16 results that fall among its subnormals. */
static double unary_atol(gc_dtype dtype) { return dtype == GC_F64 ? 1e-14 : 1e-6; }

static void test_unary(void) {
    const struct {
        const char *name;
        gc_tensor *(*fn)(const gc_tensor *);
        double lo, hi; /* the input range: inside the domain of log, sqrt and rsqrt */
    } ops[] = {
        {"neg", gc_neg, -4, 4},
        {"exp", gc_exp, -4, 4},
        {"log", gc_log, 0.05, 4},
        {"tanh", gc_tanh, -4, 4},
        {"relu", gc_relu, -4, 4},
        {"gelu_tanh", gc_gelu_tanh, -4, 4},
        {"gelu_erf", gc_gelu_erf, -4, 4},
        {"sqrt", gc_sqrt, 0, 4},
        {"rsqrt", gc_rsqrt, 0.05, 4},
    };
    uint64_t seed = 100;
    for (int o = 0; o < COUNT(ops); o++)
        for (int d = 0; d < COUNT(float_dtypes); d++)
            for (int s = 0; s < COUNT(sizes); s++) {
                gc_dtype dtype = float_dtypes[d];
                gc_tensor *x = gc_test_random_in(sizes[s].ndim, sizes[s].dims, dtype, ops[o].lo, ops[o].hi, seed++);
                gc_tensor *x_cuda = on_cuda(x);
                char what[128], text[64];
                snprintf(what, sizeof what, "%s %s", ops[o].name, gc_tensor_str(x, text, sizeof text));
                expect_parity(ops[o].fn(x), ops[o].fn(x_cuda), unary_atol(dtype), gc_test_tolerance(dtype), what);
                gc_tensor_release(x);
                gc_tensor_release(x_cuda);
            }
}

/* The derivatives the backward rules of relu and the gelus take from x, alone (gc_unary_apply)
 * and times g (gc_unary_grad: the CPU's fused kernel for f32 and f64, the derivative and a
 * multiply elsewhere, as on CUDA). The same library functions as the ops above, so the same
 * bounds; the product with g adds one rounding, inside gc_test_tolerance. */
static void test_derivatives(void) {
    const struct {
        const char *name;
        gc_unary_op op;
    } derivatives[] = {
        {"relu'", GC_UNARY_RELU_GRAD}, {"gelu_tanh'", GC_UNARY_GELU_TANH_GRAD}, {"gelu_erf'", GC_UNARY_GELU_ERF_GRAD}};
    uint64_t seed = 3000;
    for (int o = 0; o < COUNT(derivatives); o++)
        for (int d = 0; d < COUNT(float_dtypes); d++)
            for (int s = 0; s < COUNT(sizes); s++) {
                gc_dtype dtype = float_dtypes[d];
                gc_tensor *x = gc_test_random_in(sizes[s].ndim, sizes[s].dims, dtype, -4, 4, seed++);
                gc_tensor *g = gc_test_random(sizes[s].ndim, sizes[s].dims, dtype, seed++);
                gc_tensor *x_cuda = on_cuda(x), *g_cuda = on_cuda(g);
                char what[128], text[64];
                snprintf(what, sizeof what, "%s %s", derivatives[o].name, gc_tensor_str(x, text, sizeof text));
                expect_parity(gc_unary_apply(derivatives[o].op, x), gc_unary_apply(derivatives[o].op, x_cuda),
                              unary_atol(dtype), gc_test_tolerance(dtype), what);
                snprintf(what, sizeof what, "g * %s %s", derivatives[o].name, gc_tensor_str(x, text, sizeof text));
                expect_parity(gc_unary_grad(derivatives[o].op, x, g), gc_unary_grad(derivatives[o].op, x_cuda, g_cuda),
                              unary_atol(dtype), gc_test_tolerance(dtype), what);
                RELEASE(x, g, x_cuda, g_cuda);
            }
}

/* --- binary ---
 * One correctly rounded IEEE operation on both backends (CUDA's float division is IEEE
 * unless built with -use_fast_math), so the results are expected equal; the float
 * tolerance allows a CPU that computes in double and rounds twice. i32 must be exact. */
static double binary_rtol(gc_dtype dtype) { return dtype == GC_I32 ? 0 : gc_test_tolerance(dtype); }

static const struct {
    const char *name;
    gc_tensor *(*fn)(const gc_tensor *, const gc_tensor *);
    bool int_ok; /* defined for i32 */
} binary_ops[] = {{"add", gc_add, true}, {"sub", gc_sub, true}, {"mul", gc_mul, true}, {"div", gc_div, false}};

/* Operands of `dtype` for a binary op (i32 in [-1000, 1000): products stay far from
 * overflow), made on the CPU from successive seeds. */
static gc_tensor *binary_operand(const shape *s, gc_dtype dtype, uint64_t *seed) {
    double range = dtype == GC_I32 ? 1000 : 1;
    return gc_test_random_in(s->ndim, s->dims, dtype, -range, range, (*seed)++);
}

static void test_binary(void) {
    const struct {
        shape a, b;
    } pairs[] = {
        /* one shape: the flat kernel (also with size-1 dims) */
        {{1, {1}}, {1, {1}}},
        {{2, {3, 7}}, {2, {3, 7}}},
        {{2, {1, 33}}, {2, {1, 33}}},
        {{2, {2, 4097}}, {2, {2, 4097}}},
        /* broadcasting: dims merged into two (test_binary_merged), or walked */
        {{4, {2, 3, 4, 33}}, {1, {33}}},         /* a bias over a batch */
        {{2, {7, 1}}, {2, {7, 33}}},             /* a column over rows */
        {{3, {3, 1, 33}}, {2, {5, 1}}},          /* both broadcast: [3, 5, 33] */
        {{4, {2, 1, 1, 7}}, {4, {2, 3, 7, 7}}},  /* an attention mask */
        {{0, {0}}, {2, {4, 33}}},                /* a 0-dim scalar */
        {{2, {0, 7}}, {1, {7}}},                 /* no rows */
    };
    uint64_t seed = 1000;
    for (int o = 0; o < COUNT(binary_ops); o++)
        for (int d = 0; d < COUNT(all_dtypes); d++)
            for (int p = 0; p < COUNT(pairs); p++) {
                gc_dtype dtype = all_dtypes[d];
                if (dtype == GC_I32 && !binary_ops[o].int_ok) continue;
                gc_tensor *a = binary_operand(&pairs[p].a, dtype, &seed), *b = binary_operand(&pairs[p].b, dtype, &seed);
                gc_tensor *a_cuda = on_cuda(a), *b_cuda = on_cuda(b);
                char what[160], ta[64], tb[64];
                snprintf(what, sizeof what, "%s %s, %s", binary_ops[o].name, gc_tensor_str(a, ta, sizeof ta),
                         gc_tensor_str(b, tb, sizeof tb));
                gc_tensor *(*fn)(const gc_tensor *, const gc_tensor *) = binary_ops[o].fn;
                expect_parity(fn(a, b), fn(a_cuda, b_cuda), 0, binary_rtol(dtype), what);
                /* the operands swapped: the broadcast strides trade places */
                expect_parity(fn(b, a), fn(b_cuda, a_cuda), 0, binary_rtol(dtype), what);
                gc_tensor_release(a);
                gc_tensor_release(b);
                gc_tensor_release(a_cuda);
                gc_tensor_release(b_cuda);
            }
}

/* Broadcasts whose dims merge into two (gc_broadcast_merge_2d: binary_2d_kernel): a row
 * repeated over the leading dims (a bias) and a column repeated along the last (per-row
 * statistics), as either operand, and broadcasts that do not merge (the walk over every
 * dim). Against the CPU as above, and bit for bit against the same op on the broadcast
 * operand expanded first (one shape: binary_same_shape_kernel), which reads the same
 * elements. [4097, 600] is more elements than one pass of the grid covers. */
static void test_binary_merged(void) {
    const struct {
        shape full, repeated;
    } pairs[] = {
        {{2, {64, 96}}, {1, {96}}},               /* a row */
        {{3, {3, 5, 33}}, {1, {33}}},             /* a row over two leading dims */
        {{4, {2, 3, 4, 40}}, {3, {1, 1, 40}}},    /* a row with dims of 1 */
        {{2, {4097, 600}}, {1, {600}}},           /* a row, beyond one grid pass */
        {{2, {64, 96}}, {2, {64, 1}}},            /* a column */
        {{3, {2, 6, 33}}, {3, {2, 6, 1}}},        /* layernorm's statistics [B, T, 1] */
        {{2, {5, 3}}, {2, {5, 1}}},               /* a short column */
        {{2, {4, 33}}, {1, {1}}},                 /* one element: a row of 1 */
        {{3, {3, 5, 33}}, {3, {3, 1, 33}}},       /* a dim repeated in the middle: no merge */
        {{4, {2, 3, 7, 7}}, {4, {2, 1, 1, 7}}},   /* an attention mask: no merge */
    };
    uint64_t seed = 7000;
    for (int o = 0; o < COUNT(binary_ops); o++)
        for (int d = 0; d < COUNT(all_dtypes); d++)
            for (int p = 0; p < COUNT(pairs); p++) {
                gc_dtype dtype = all_dtypes[d];
                if (dtype == GC_I32 && !binary_ops[o].int_ok) continue;
                const shape *fs = &pairs[p].full, *rs = &pairs[p].repeated;
                gc_tensor *full = binary_operand(fs, dtype, &seed), *repeated = binary_operand(rs, dtype, &seed);
                gc_tensor *full_cuda = on_cuda(full), *repeated_cuda = on_cuda(repeated);
                gc_tensor *expanded_cuda = gc_expand(repeated_cuda, fs->ndim, fs->dims);
                REQUIRE(expanded_cuda);
                char what[160], tf[64], tr[64];
                for (int swap = 0; swap <= 1; swap++) {
                    const gc_tensor *x = swap ? repeated : full, *y = swap ? full : repeated;
                    const gc_tensor *x_cuda = swap ? repeated_cuda : full_cuda;
                    const gc_tensor *y_cuda = swap ? full_cuda : repeated_cuda;
                    const gc_tensor *x_same = swap ? expanded_cuda : full_cuda; /* one shape */
                    const gc_tensor *y_same = swap ? full_cuda : expanded_cuda;
                    snprintf(what, sizeof what, "%s %s, %s", binary_ops[o].name, gc_tensor_str(x, tf, sizeof tf),
                             gc_tensor_str(y, tr, sizeof tr));
                    gc_tensor *got = binary_ops[o].fn(x_cuda, y_cuda);
                    REQUIRE(got);
                    expect_parity(binary_ops[o].fn(x, y), gc_tensor_retain(got), 0, binary_rtol(dtype), what);
                    strncat(what, ", against one shape", sizeof what - strlen(what) - 1);
                    expect_parity(binary_ops[o].fn(x_same, y_same), got, 0, 0, what);
                }
                RELEASE(full, repeated, full_cuda, repeated_cuda, expanded_cuda);
            }
}

/* --- with a scalar ---
 * As for binary ops: one rounded operation, expected equal; i32 (add, sub and mul with a
 * whole scalar) exactly, wrapping modulo 2^32 past INT32_MAX on both. */
static void test_binary_scalar(void) {
    const struct {
        const char *name;
        gc_tensor *(*fn)(const gc_tensor *, double);
    } ops[] = {
        {"add_scalar", gc_add_scalar}, {"sub_scalar", gc_sub_scalar}, {"rsub_scalar", gc_rsub_scalar},
        {"mul_scalar", gc_mul_scalar}, {"div_scalar", gc_div_scalar}, {"rdiv_scalar", gc_rdiv_scalar},
    };
    /* Inexact in binary, so a backend that rounds it to f32 first and one that computes
     * in double differ by an f32 ulp or so: inside the tolerance. It keeps every result
     * away from 0 for a in [-1, 1) (no cancellation in a + s, a - s, s - a). */
    const double scalar = -1.3;
    uint64_t seed = 5000;
    for (int o = 0; o < COUNT(ops); o++)
        for (int d = 0; d < COUNT(float_dtypes); d++)
            for (int s = 0; s < COUNT(sizes); s++) {
                gc_dtype dtype = float_dtypes[d];
                gc_tensor *a = gc_test_random(sizes[s].ndim, sizes[s].dims, dtype, seed++);
                gc_tensor *a_cuda = on_cuda(a);
                char what[128], text[64];
                snprintf(what, sizeof what, "%s %s", ops[o].name, gc_tensor_str(a, text, sizeof text));
                expect_parity(ops[o].fn(a, scalar), ops[o].fn(a_cuda, scalar), 0, gc_test_tolerance(dtype), what);
                gc_tensor_release(a);
                gc_tensor_release(a_cuda);
            }
    /* i32: the first four ops (no division), with a small scalar and one that overflows */
    const double int_scalars[] = {-7, 2147483647};
    for (int o = 0; o < 4; o++)
        for (int c = 0; c < COUNT(int_scalars); c++)
            for (int s = 0; s < COUNT(sizes); s++) {
                gc_tensor *a = gc_test_random_in(sizes[s].ndim, sizes[s].dims, GC_I32, -1000, 1000, seed++);
                gc_tensor *a_cuda = on_cuda(a);
                char what[128], text[64];
                snprintf(what, sizeof what, "%s %g %s", ops[o].name, int_scalars[c], gc_tensor_str(a, text, sizeof text));
                expect_parity(ops[o].fn(a, int_scalars[c]), ops[o].fn(a_cuda, int_scalars[c]), 0, 0, what);
                RELEASE(a, a_cuda);
            }
}

int main(void) {
    gc_test_require_cuda();
    GC_TEST_CASE(test_fill);
    GC_TEST_CASE(test_arange);
    GC_TEST_CASE(test_unary);
    GC_TEST_CASE(test_derivatives);
    GC_TEST_CASE(test_binary);
    GC_TEST_CASE(test_binary_merged);
    GC_TEST_CASE(test_binary_scalar);
    return gc_test_result();
}
