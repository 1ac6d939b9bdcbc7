/* Elementwise ops on the CPU against hand-computed values: binary ops with every kind of
 * broadcast, ops with a scalar, unary maps against libm, the activations' fused backward,
 * the dtypes and the errors. */
#include "tensor/op_internal.h"
#include "values.h"

/* One rounding of an exact result to f32, 2^-24 relative: the inputs are small dyadic
 * values, so add, sub and mul are exact in f32 and div rounds once. Other tolerances are
 * stated where they are used; 0 means the result must be exact. */
#define F32_ROUNDING 1e-7

#define M_PI_VALUE 3.14159265358979323846 /* M_PI is not in C11 */


/* Checks that `got` has the shape and values wanted (within atol + rtol |want|), then
 * releases it. */
static void expect(gc_tensor *got, int ndim, const int64_t *shape, const double *want, double atol, double rtol,
                   const char *what) {
    REQUIRE(got);
    gc_tensor *w = gc_from_host(want, ndim, shape, GC_F64, gc_cpu());
    REQUIRE(w);
    gc_test_expect_close(w, got, atol, rtol, what);
    gc_tensor_release(w);
    gc_tensor_release(got);
}

/* --- binary ops --- */

typedef gc_tensor *(*binary_fn)(const gc_tensor *, const gc_tensor *);
static const struct {
    const char *name;
    binary_fn fn;
} binary_ops[] = {{"add", gc_add}, {"sub", gc_sub}, {"mul", gc_mul}, {"div", gc_div}};
enum { BINARY_OP_COUNT = sizeof binary_ops / sizeof binary_ops[0] };

static double binary_reference(int op, double x, double y) {
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;
    }
}

/* Runs every binary op on a and b (f32). a_of[i] and b_of[i] are the elements of a and
 * b that output element i pairs, as each case spells out for its broadcast. */
static void check_binary_ops(const char *what, const gc_tensor *a, const gc_tensor *b, int ndim,
                             const int64_t *shape, const double *a_of, const double *b_of, int64_t numel) {
    double want[64];
    REQUIRE(numel <= 64);
    for (int op = 0; op < BINARY_OP_COUNT; op++) {
        char label[96];
        snprintf(label, sizeof label, "%s %s", binary_ops[op].name, what);
        for (int64_t i = 0; i < numel; i++) want[i] = binary_reference(op, a_of[i], b_of[i]);
        gc_tensor *got = binary_ops[op].fn(a, b);
        REQUIRE(got);
        CHECK(got->dtype == GC_F32);
        expect(got, ndim, shape, want, 0, F32_ROUNDING, label);
    }
}

static void test_same_shape(void) {
    const double a[6] = {1, -2, 3.5, 0, 8, -0.25}, b[6] = {2, 4, -0.5, 3, 3, 0.125};
    gc_tensor *ta = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), a), *tb = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), b);
    check_binary_ops("same shape", ta, tb, GC_SHAPE(2, 3), a, b, 6);
    /* The same sum written out, so the reference above is not the only witness. */
    expect(gc_add(ta, tb), GC_SHAPE(2, 3), (const double[]){3, 2, 3, 3, 11, -0.125}, 0, 0, "add literal");
    gc_tensor_release(ta);
    gc_tensor_release(tb);
}

static void test_row_bias(void) { /* [B, D] op [D] */
    const double a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {0.5, -1, 4};
    gc_tensor *ta = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), a), *tb = gc_test_tensor(GC_F32, GC_SHAPE(3), b);
    double a_of[6], b_of[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            a_of[i * 3 + j] = a[i * 3 + j];
            b_of[i * 3 + j] = b[j];
        }
    check_binary_ops("[2,3] with [3]", ta, tb, GC_SHAPE(2, 3), a_of, b_of, 6);
    expect(gc_add(ta, tb), GC_SHAPE(2, 3), (const double[]){1.5, 1, 7, 4.5, 4, 10}, 0, 0, "bias literal");
    /* The bias on the left broadcasts the same way. */
    expect(gc_sub(tb, ta), GC_SHAPE(2, 3), (const double[]){-0.5, -3, 1, -3.5, -6, -2}, 0, 0, "[3] - [2,3]");
    gc_tensor_release(ta);
    gc_tensor_release(tb);
}

static void test_column(void) { /* [B, D] op [B, 1] */
    const double a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {2, -4};
    gc_tensor *ta = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), a), *tb = gc_test_tensor(GC_F32, GC_SHAPE(2, 1), b);
    double a_of[6], b_of[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            a_of[i * 3 + j] = a[i * 3 + j];
            b_of[i * 3 + j] = b[i];
        }
    check_binary_ops("[2,3] with [2,1]", ta, tb, GC_SHAPE(2, 3), a_of, b_of, 6);
    expect(gc_div(ta, tb), GC_SHAPE(2, 3), (const double[]){0.5, 1, 1.5, -1, -1.25, -1.5}, 0, 0, "column literal");
    gc_tensor_release(ta);
    gc_tensor_release(tb);
}

static void test_attention_mask(void) { /* [B, 1, 1, T] op [B, H, T, T] */
    enum { B = 2, H = 2, T = 3 };
    double mask[B * T] = {0, -1, -2, 0.5, 0, -4}, scores[B * H * T * T];
    for (int i = 0; i < B * H * T * T; i++) scores[i] = 1 + 0.25 * i;
    gc_tensor *tm = gc_test_tensor(GC_F32, GC_SHAPE(B, 1, 1, T), mask), *ts = gc_test_tensor(GC_F32, GC_SHAPE(B, H, T, T), scores);
    double a_of[B * H * T * T], b_of[B * H * T * T];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int s = 0; s < T; s++) {
                    int i = ((b * H + h) * T + t) * T + s;
                    a_of[i] = mask[b * T + s];
                    b_of[i] = scores[i];
                }
    check_binary_ops("[2,1,1,3] with [2,2,3,3]", tm, ts, GC_SHAPE(B, H, T, T), a_of, b_of, B * H * T * T);
    gc_tensor_release(tm);
    gc_tensor_release(ts);
}

static void test_small_broadcasts(void) {
    /* [1] with [3] */
    gc_tensor *one = gc_test_tensor(GC_F32, GC_SHAPE(1), (const double[]){2});
    gc_tensor *three = gc_test_tensor(GC_F32, GC_SHAPE(3), (const double[]){1, -3, 0.5});
    check_binary_ops("[1] with [3]", one, three, GC_SHAPE(3), (const double[]){2, 2, 2},
                     (const double[]){1, -3, 0.5}, 3);

    /* 0-dim with [2, 3], on either side, and with another 0-dim (which stays 0-dim) */
    const double m[6] = {1, 2, -3, 4, 0.5, 6};
    gc_tensor *scalar = gc_test_tensor(GC_F32, 0, NULL, (const double[]){4});
    gc_tensor *matrix = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), m);
    const double fours[6] = {4, 4, 4, 4, 4, 4};
    check_binary_ops("0-dim with [2,3]", scalar, matrix, GC_SHAPE(2, 3), fours, m, 6);
    check_binary_ops("[2,3] with 0-dim", matrix, scalar, GC_SHAPE(2, 3), m, fours, 6);
    gc_tensor *other = gc_test_tensor(GC_F32, 0, NULL, (const double[]){0.5});
    check_binary_ops("0-dim with 0-dim", scalar, other, 0, NULL, (const double[]){4}, (const double[]){0.5}, 1);

    /* [3, 1] with [1, 4]: both inputs broadcast */
    gc_tensor *col = gc_test_tensor(GC_F32, GC_SHAPE(3, 1), (const double[]){1, 2, 3});
    gc_tensor *row = gc_test_tensor(GC_F32, GC_SHAPE(1, 4), (const double[]){10, 20, 30, 40});
    expect(gc_mul(col, row), GC_SHAPE(3, 4), (const double[]){10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120}, 0, 0,
           "[3,1] * [1,4]");

    /* An empty batch broadcasts to an empty result. */
    gc_tensor *empty = gc_zeros(GC_SHAPE(0, 3), GC_F32, gc_cpu());
    REQUIRE(empty);
    gc_tensor *sum = gc_add(empty, three);
    REQUIRE(sum);
    CHECK(sum->ndim == 2 && sum->shape[0] == 0 && sum->shape[1] == 3);
    gc_tensor_release(sum);

    gc_tensor *items[] = {one, three, scalar, matrix, other, col, row, empty};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) gc_tensor_release(items[i]);
}

static void test_i32(void) {
    /* 16777217 = 2^24 + 1 and the products below are exact in integers but not in f32. */
    gc_tensor *a = gc_test_tensor(GC_I32, GC_SHAPE(2, 2), (const double[]){16777217, -7, 46341, 2147483647});
    gc_tensor *b = gc_test_tensor(GC_I32, GC_SHAPE(2, 2), (const double[]){3, 3, 46340, 2147483647});
    gc_tensor *sum = gc_add(a, b);
    REQUIRE(sum);
    CHECK(sum->dtype == GC_I32);
    /* Overflow wraps as in 32-bit two's complement: 2 (2^31 - 1) = 2^32 - 2 -> -2. */
    expect(sum, GC_SHAPE(2, 2), (const double[]){16777220, -4, 92681, -2}, 0, 0, "i32 add");
    /* (2^31 - 1)^2 = 2^62 - 2^32 + 1 wraps to 1; through a double it would lose its low
     * bits and not come out as 1. */
    expect(gc_mul(a, b), GC_SHAPE(2, 2), (const double[]){50331651, -21, 2147441940, 1}, 0, 0, "i32 mul");
    gc_tensor *bias = gc_test_tensor(GC_I32, GC_SHAPE(2), (const double[]){1, -1});
    expect(gc_sub(a, bias), GC_SHAPE(2, 2), (const double[]){16777216, -6, 46340, -2147483648.0}, 0, 0,
           "i32 sub with a [2] row");
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(bias);
}

/* f16, bf16 and f64: computed in f32 (f64 in double) and rounded once, to nearest even. */
static void test_float_dtypes(void) {
    /* f16 has 10 mantissa bits, so near 1 its spacing is 2^-10: 1 + 2^-11 is a tie that
     * goes to the even 1, (1 + 2^-10) + 2^-11 a tie that goes to the even 1 + 2^-9. 1/3
     * rounds down to 0x3555 = 0.333251953125. */
    const double half_ulp_f16 = 0x1p-11;
    gc_tensor *a16 = gc_test_tensor(GC_F16, GC_SHAPE(3), (const double[]){1, 1 + 0x1p-10, 1});
    gc_tensor *b16 = gc_test_tensor(GC_F16, GC_SHAPE(3), (const double[]){half_ulp_f16, half_ulp_f16, 3});
    gc_tensor *sum16 = gc_add(a16, b16);
    REQUIRE(sum16);
    CHECK(sum16->dtype == GC_F16);
    expect(sum16, GC_SHAPE(3), (const double[]){1, 1 + 0x1p-9, 4}, 0, 0, "f16 add rounds to even");
    expect(gc_div(a16, b16), GC_SHAPE(3), (const double[]){2048, 2048 + 2, 0.333251953125}, 0, 0, "f16 div");

    /* bf16 has 7 mantissa bits: the same ties one level up, and 1/3 rounds up to
     * 1.0101011b x 2^-2 = 0.333984375. */
    gc_tensor *a16b = gc_test_tensor(GC_BF16, GC_SHAPE(3), (const double[]){1, 1 + 0x1p-7, 1});
    gc_tensor *b16b = gc_test_tensor(GC_BF16, GC_SHAPE(3), (const double[]){0x1p-8, 0x1p-8, 3});
    expect(gc_add(a16b, b16b), GC_SHAPE(3), (const double[]){1, 1 + 0x1p-6, 4}, 0, 0, "bf16 add rounds to even");
    expect(gc_div(a16b, b16b), GC_SHAPE(3), (const double[]){256, 258, 0.333984375}, 0, 0, "bf16 div");

    /* f64 keeps what f32 would lose: 1 + 2^-40, and 1/3 to the last double bit. */
    gc_tensor *a64 = gc_test_tensor(GC_F64, GC_SHAPE(2), (const double[]){1, 1});
    gc_tensor *b64 = gc_test_tensor(GC_F64, GC_SHAPE(2), (const double[]){0x1p-40, 3});
    gc_tensor *sum64 = gc_add(a64, b64);
    REQUIRE(sum64);
    CHECK(sum64->dtype == GC_F64);
    expect(sum64, GC_SHAPE(2), (const double[]){1 + 0x1p-40, 4}, 0, 0, "f64 add");
    expect(gc_div(a64, b64), GC_SHAPE(2), (const double[]){0x1p40, 1.0 / 3.0}, 0, 0, "f64 div");
    expect(gc_mul(a64, b64), GC_SHAPE(2), (const double[]){0x1p-40, 3}, 0, 0, "f64 mul");
    expect(gc_sub(a64, b64), GC_SHAPE(2), (const double[]){1 - 0x1p-40, -2}, 0, 0, "f64 sub");

    gc_tensor *items[] = {a16, b16, a16b, b16b, a64, b64};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) gc_tensor_release(items[i]);
}

/* --- with a scalar --- */

static void test_scalar_ops(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2, 2), (const double[]){1, -2, 4, 0.5});
    expect(gc_add_scalar(x, 1.5), GC_SHAPE(2, 2), (const double[]){2.5, -0.5, 5.5, 2}, 0, 0, "add_scalar");
    expect(gc_sub_scalar(x, 1.5), GC_SHAPE(2, 2), (const double[]){-0.5, -3.5, 2.5, -1}, 0, 0, "sub_scalar");
    expect(gc_rsub_scalar(x, 1.5), GC_SHAPE(2, 2), (const double[]){0.5, 3.5, -2.5, 1}, 0, 0, "rsub_scalar");
    expect(gc_mul_scalar(x, -3), GC_SHAPE(2, 2), (const double[]){-3, 6, -12, -1.5}, 0, 0, "mul_scalar");
    expect(gc_div_scalar(x, 4), GC_SHAPE(2, 2), (const double[]){0.25, -0.5, 1, 0.125}, 0, 0, "div_scalar");
    expect(gc_rdiv_scalar(x, 2), GC_SHAPE(2, 2), (const double[]){2, -1, 0.5, 4}, 0, 0, "rdiv_scalar");
    /* 1/3 is not a float: one f32 rounding of the exact quotient. */
    expect(gc_div_scalar(x, 3), GC_SHAPE(2, 2), (const double[]){1.0 / 3, -2.0 / 3, 4.0 / 3, 0.5 / 3}, 0,
           F32_ROUNDING, "div_scalar by 3");

    /* A 0-dim input stays 0-dim. */
    gc_tensor *scalar = gc_test_tensor(GC_F32, 0, NULL, (const double[]){3});
    expect(gc_rsub_scalar(scalar, 1), 0, NULL, (const double[]){-2}, 0, 0, "rsub_scalar 0-dim");

    /* i32 stays in integers. */
    gc_tensor *ints = gc_test_tensor(GC_I32, GC_SHAPE(3), (const double[]){16777217, -5, 7});
    gc_tensor *ints_plus = gc_add_scalar(ints, 2);
    REQUIRE(ints_plus);
    CHECK(ints_plus->dtype == GC_I32);
    expect(ints_plus, GC_SHAPE(3), (const double[]){16777219, -3, 9}, 0, 0, "i32 add_scalar");
    expect(gc_mul_scalar(ints, 3), GC_SHAPE(3), (const double[]){50331651, -15, 21}, 0, 0, "i32 mul_scalar");
    expect(gc_rsub_scalar(ints, 1), GC_SHAPE(3), (const double[]){-16777216, 6, -6}, 0, 0, "i32 rsub_scalar");

    /* f16: the scalar joins the f32 math unrounded. 2^-11 + 2^-22 rounded to f16 first
     * would be 2^-11, and 1 + 2^-11 a tie going to 1; in f32 the sum is just above the
     * tie and rounds up to 1 + 2^-10. */
    gc_tensor *ones16 = gc_test_tensor(GC_F16, GC_SHAPE(2), (const double[]){1, 1});
    expect(gc_add_scalar(ones16, 0x1p-11 + 0x1p-22), GC_SHAPE(2), (const double[]){1 + 0x1p-10, 1 + 0x1p-10}, 0, 0,
           "f16 add_scalar rounds once");
    gc_tensor *bf = gc_test_tensor(GC_BF16, GC_SHAPE(2), (const double[]){3, -1});
    expect(gc_rdiv_scalar(bf, 1), GC_SHAPE(2), (const double[]){0.333984375, -1}, 0, 0, "bf16 rdiv_scalar");
    gc_tensor *f64 = gc_test_tensor(GC_F64, GC_SHAPE(2), (const double[]){3, -1});
    expect(gc_rdiv_scalar(f64, 1), GC_SHAPE(2), (const double[]){1.0 / 3.0, -1}, 0, 0, "f64 rdiv_scalar");

    gc_tensor *items[] = {x, scalar, ints, ones16, bf, f64};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) gc_tensor_release(items[i]);
}

/* --- unary ops --- */

typedef gc_tensor *(*unary_fn)(const gc_tensor *);

static double gelu_tanh_reference(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI_VALUE) * (x + 0.044715 * x * x * x)));
}
static double gelu_erf_reference(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double relu_reference(double x) { return x > 0 ? x : 0; }
static double neg_reference(double x) { return -x; }
static double rsqrt_reference(double x) { return 1 / sqrt(x); }

static const struct {
    const char *name;
    unary_fn fn;
    double (*reference)(double);
    bool positive_only; /* log, sqrt and rsqrt are checked on positive inputs here */
} unary_ops[] = {
    {"neg", gc_neg, neg_reference, false},          {"exp", gc_exp, exp, false},
    {"log", gc_log, log, true},                     {"tanh", gc_tanh, tanh, false},
    {"relu", gc_relu, relu_reference, false},       {"gelu_tanh", gc_gelu_tanh, gelu_tanh_reference, false},
    {"gelu_erf", gc_gelu_erf, gelu_erf_reference, false}, {"sqrt", gc_sqrt, sqrt, true},
    {"rsqrt", gc_rsqrt, rsqrt_reference, true},
};

/* Every unary op against its formula evaluated in double with libm. */
static void check_unary_dtype(gc_dtype dtype, double atol, double rtol) {
    enum { N = 8 };
    const double signed_inputs[N] = {-3, -1.5, -0.5, 0, 0.25, 1, 2, 3.5};
    const double positive_inputs[N] = {0.125, 0.25, 0.5, 1, 2, 3, 4, 10};
    for (size_t op = 0; op < sizeof unary_ops / sizeof unary_ops[0]; op++) {
        const double *in = unary_ops[op].positive_only ? positive_inputs : signed_inputs;
        double want[N];
        for (int i = 0; i < N; i++) want[i] = unary_ops[op].reference(in[i]);
        gc_tensor *x = gc_test_tensor(dtype, GC_SHAPE(2, 4), in);
        gc_tensor *y = unary_ops[op].fn(x);
        REQUIRE(y);
        CHECK(y->dtype == dtype);
        char label[64];
        snprintf(label, sizeof label, "%s %s", unary_ops[op].name, gc_dtype_name(dtype));
        expect(y, GC_SHAPE(2, 4), want, atol, rtol, label);
        gc_tensor_release(x);
    }
}

static void test_unary(void) {
    /* f32: libm's float functions are within an ulp or two, and the gelu formulas add a
     * few roundings: 1e-6 relative. For negative inputs, gelu's 1 + tanh(...) cancels
     * (down to 0.003 at -3), which turns tanhf's absolute error of ~6e-8 into up to 1e-7
     * absolute on a result of magnitude 0.004: covered by atol 1e-6. */
    check_unary_dtype(GC_F32, 1e-6, 1e-6);
    /* f64: libm's double functions, same formulas in double: a few double ulps. */
    check_unary_dtype(GC_F64, 1e-15, 1e-14);
    /* f16 / bf16: computed in f32 and rounded once: half an ulp of the stored type,
     * 2^-11 and 2^-8 relative, plus the f32 error (negligible) and gelu's cancellation
     * as above (the atol). */
    check_unary_dtype(GC_F16, 1e-6, 0x1p-11);
    check_unary_dtype(GC_BF16, 1e-6, 0x1p-8);

    /* Edges, exact: relu at 0 and below, log 0 = -inf, sqrt of a negative = nan,
     * rsqrt 0 = inf, exp 0 = 1, tanh saturates. */
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){-2, -0.5, 0, 0});
    gc_tensor *relu = gc_relu(x);
    expect(relu, GC_SHAPE(4), (const double[]){0, 0, 0, 0}, 0, 0, "relu at 0 and negatives");
    gc_tensor *edges = gc_test_tensor(GC_F32, GC_SHAPE(3), (const double[]){0, -1, 40});
    expect(gc_log(edges), GC_SHAPE(3), (const double[]){-INFINITY, NAN, log(40)}, 0, 1e-6, "log edges");
    expect(gc_sqrt(edges), GC_SHAPE(3), (const double[]){0, NAN, sqrt(40)}, 0, 1e-6, "sqrt edges");
    expect(gc_rsqrt(edges), GC_SHAPE(3), (const double[]){INFINITY, NAN, 1 / sqrt(40)}, 0, 1e-6, "rsqrt edges");
    expect(gc_exp(edges), GC_SHAPE(3), (const double[]){1, exp(-1), exp(40)}, 0, 1e-6, "exp edges");
    expect(gc_tanh(edges), GC_SHAPE(3), (const double[]){0, tanh(-1), 1}, 0, 1e-6, "tanh edges");
    gc_tensor *nan_in = gc_test_tensor(GC_F32, GC_SHAPE(1), (const double[]){NAN});
    expect(gc_relu(nan_in), GC_SHAPE(1), (const double[]){NAN}, 0, 0, "relu keeps a nan");

    /* A 0-dim input stays 0-dim. */
    gc_tensor *scalar = gc_test_tensor(GC_F32, 0, NULL, (const double[]){-4});
    expect(gc_neg(scalar), 0, NULL, (const double[]){4}, 0, 0, "neg 0-dim");

    gc_tensor *items[] = {x, edges, nan_in, scalar};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) gc_tensor_release(items[i]);
}

/* --- views: ops read a view's elements from its offset in the shared storage --- */

static void test_views(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(4, 2), (const double[]){1, 2, 3, 4, 5, 6, 7, 8});
    gc_tensor *rows = gc_slice0(x, 1, 3); /* [[3, 4], [5, 6]] */
    gc_tensor *bias = gc_test_tensor(GC_F32, GC_SHAPE(2), (const double[]){10, 20});
    REQUIRE(rows);
    expect(gc_add(rows, bias), GC_SHAPE(2, 2), (const double[]){13, 24, 15, 26}, 0, 0, "add on a slice");
    expect(gc_mul_scalar(rows, 2), GC_SHAPE(2, 2), (const double[]){6, 8, 10, 12}, 0, 0, "mul_scalar on a slice");
    expect(gc_neg(rows), GC_SHAPE(2, 2), (const double[]){-3, -4, -5, -6}, 0, 0, "neg on a slice");
    /* A reshaped slice: [3, 4, 5, 6] as [4] */
    gc_tensor *flat = gc_reshape(rows, GC_SHAPE(4));
    gc_tensor *last = gc_slice0(x, 3, 4); /* [[7, 8]] */
    REQUIRE(flat && last);
    expect(gc_sub(flat, flat), GC_SHAPE(4), (const double[]){0, 0, 0, 0}, 0, 0, "sub of a view with itself");
    expect(gc_div(rows, last), GC_SHAPE(2, 2), (const double[]){3.0 / 7, 0.5, 5.0 / 7, 0.75}, 0, F32_ROUNDING,
           "div of two slices");
    gc_tensor *items[] = {x, rows, bias, flat, last};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) gc_tensor_release(items[i]);
}

/* --- errors --- */

static void add_incompatible(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu()), *b = gc_zeros(GC_SHAPE(4), GC_F32, gc_cpu());
    gc_add(a, b);
}
static void mul_incompatible_4d(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(GC_SHAPE(2, 1, 3, 3), GC_F32, gc_cpu());
    gc_tensor *b = gc_zeros(GC_SHAPE(3, 2, 3, 3), GC_F32, gc_cpu());
    gc_mul(a, b);
}
static void sub_dtype_mismatch(void *arg) {
    (void)arg;
    gc_tensor *a = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu()), *b = gc_zeros(GC_SHAPE(2), GC_F16, gc_cpu());
    gc_sub(a, b);
}
static void div_i32(void *arg) {
    (void)arg;
    gc_tensor *a = gc_ones(GC_SHAPE(2), GC_I32, gc_cpu());
    gc_div(a, a);
}
static void div_scalar_i32(void *arg) {
    (void)arg;
    gc_div_scalar(gc_ones(GC_SHAPE(2), GC_I32, gc_cpu()), 2);
}
static void add_scalar_i32_fraction(void *arg) {
    (void)arg;
    gc_add_scalar(gc_ones(GC_SHAPE(2), GC_I32, gc_cpu()), 0.5);
}
static void exp_i32(void *arg) {
    (void)arg;
    gc_exp(gc_ones(GC_SHAPE(2), GC_I32, gc_cpu()));
}

static void test_errors(void) {
    gc_test_expect_fatal(add_incompatible, NULL, "add: shapes do not broadcast: [2, 3] f32 cpu and [4] f32 cpu");
    gc_test_expect_fatal(mul_incompatible_4d, NULL, "mul: shapes do not broadcast: [2, 1, 3, 3] f32 cpu and [3, 2, 3, 3]");
    gc_test_expect_fatal(sub_dtype_mismatch, NULL, "sub: inputs of different dtypes: [2] f32 cpu and [2] f16 cpu");
    gc_test_expect_fatal(div_i32, NULL, "div: needs a floating-point tensor, got [2] i32 cpu");
    gc_test_expect_fatal(div_scalar_i32, NULL, "div_scalar: needs a floating-point tensor");
    gc_test_expect_fatal(add_scalar_i32_fraction, NULL, "add_scalar: scalar 0.5 is not an i32 value");
    gc_test_expect_fatal(exp_i32, NULL, "exp: needs a floating-point tensor, got [2] i32 cpu");

    /* A NULL input (an earlier failure) gives NULL, so a chain is checked once. */
    gc_tensor *x = gc_ones(GC_SHAPE(2), GC_F32, gc_cpu());
    REQUIRE(x);
    CHECK(gc_add(NULL, x) == NULL);
    CHECK(gc_mul(x, NULL) == NULL);
    CHECK(gc_div_scalar(NULL, 2) == NULL);
    CHECK(gc_gelu_erf(NULL) == NULL);
    gc_tensor_release(x);
}

/* gc_unary_grad (the activations' backward: the backend's one pass for f32 and f64, the
 * composed ops for the half types) gives the bits of the derivative op and then a
 * multiply, for each activation, dtype and a length with a tail past any vector width. */
static void test_unary_grad(void) {
    const gc_unary_op derivatives[] = {GC_UNARY_RELU_GRAD, GC_UNARY_GELU_TANH_GRAD, GC_UNARY_GELU_ERF_GRAD};
    const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        gc_tensor *x = gc_test_random_in(GC_SHAPE(3, 1001), dtypes[d], -5, 5, 70 + d);
        gc_tensor *g = gc_test_random_in(GC_SHAPE(3, 1001), dtypes[d], -2, 2, 80 + d);
        for (size_t k = 0; k < sizeof derivatives / sizeof *derivatives; k++) {
            gc_tensor *slope = gc_unary_apply(derivatives[k], x), *want = gc_mul(g, slope);
            gc_tensor *got = gc_unary_grad(derivatives[k], x, g);
            char what[64];
            snprintf(what, sizeof what, "unary_grad op %d %s", (int)derivatives[k], gc_dtype_name(dtypes[d]));
            gc_test_expect_close(want, got, 0, 0, what);
            RELEASE(slope, want, got);
        }
        RELEASE(x, g);
    }
    CHECK(gc_unary_grad(GC_UNARY_GELU_ERF_GRAD, NULL, NULL) == NULL);
}

static void unary_grad_of_exp(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu());
    gc_unary_grad(GC_UNARY_EXP, x, x);
}

static void unary_grad_shapes_differ(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu()), *g = gc_zeros(GC_SHAPE(3), GC_F32, gc_cpu());
    gc_unary_grad(GC_UNARY_RELU_GRAD, x, g);
}

int main(void) {
    test_unary_grad();
    gc_test_expect_fatal(unary_grad_of_exp, NULL, "unary_grad: op 1 is not a derivative taken from x");
    gc_test_expect_fatal(unary_grad_shapes_differ, NULL,
                         "unary_grad: x [2] f32 cpu and g [3] f32 cpu differ in shape");
    test_same_shape();
    test_row_bias();
    test_column();
    test_attention_mask();
    test_small_broadcasts();
    test_i32();
    test_float_dtypes();
    test_scalar_ops();
    test_unary();
    test_views();
    test_errors();
    return gc_test_result();
}
