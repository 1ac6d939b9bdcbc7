/* Optimizers, gradient clipping and learning-rate schedules on the CPU: SGD and AdamW
 * against the algorithms written out in double in this file, for every float dtype; the
 * AdamW state round trip; clipping; the schedules' values; allocation failures; and a small
 * learning run. */
#include <string.h>

#include "check.h"
#include "tensor/backend.h"
#include "tensor/cpu/kernels_cpu.h"
#include "values.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

#define LR 0.05
#define STEPS 3
#define MAX_N 6


/* --- helpers --- */

/* A leaf of `dtype` requiring a gradient, holding values [n]. */
static gc_tensor *make_param(gc_dtype dtype, int64_t n, const double *values) {
    gc_tensor *p = gc_test_tensor(dtype, GC_SHAPE(n), values);
    gc_set_requires_grad(p, true);
    return p;
}

/* Makes `values` (numel(p) of them) the gradient of p: the backward of p * values from a
 * seed of ones, after dropping any previous gradient. */
static void set_grad(gc_tensor *p, const double *values) {
    gc_zero_grad(p);
    gc_tensor *factor = gc_test_tensor(p->dtype, p->ndim, p->shape, values);
    gc_tensor *product = gc_mul(p, factor);
    gc_tensor *seed = gc_ones(p->ndim, p->shape, p->dtype, p->device);
    REQUIRE(product && seed && gc_backward(&product, &seed, 1) == GC_OK);
    RELEASE(factor, product, seed);
}

static double to_f32(double x) { return (float)x; }

/* x stored in `dtype` as a kernel stores it (f16 and bf16 from the f32 value). */
static double round_to(gc_dtype dtype, double x) {
    switch (dtype) {
    case GC_F16: return gc_f16_to_f32(gc_f32_to_f16((float)x));
    case GC_BF16: return gc_bf16_to_f32(gc_f32_to_bf16((float)x));
    case GC_F64: return x;
    default: return to_f32(x);
    }
}

/* The value the reference keeps after a step: an f16 or bf16 parameter lives in its f32
 * master (the optimizers keep masters by default), any other in its own dtype. */
static double master_value(gc_dtype dtype, double x) {
    return dtype == GC_F16 || dtype == GC_BF16 ? to_f32(x) : round_to(dtype, x);
}

/* How far a kernel may be from the double references below, which keep the parameter in
 * its dtype (f16 and bf16: in an f32 master) after each step, the state in f32, and the
 * hyper-parameters rounded to f32 as the kernels receive them:
 *  - f64: the kernel's fma against the reference's multiply and add: ~1e-16 per step;
 *  - f32 (and the f32 masters): the kernel's f32 arithmetic, some ten roundings of 2^-24
 *    over 3 steps, on values below 4;
 *  - f16, bf16 parameters: the master rounded into the dtype, where the kernel's and the
 *    reference's masters may differ in their last f32 bits: one unit in the last place of
 *    the dtype (at most 2^-10 and 2^-7 for values below 2), where those bits decide a
 *    rounding. The steps below are 0.05, 50 f16 ulps and 6 bf16 ulps, so a missing or wrong
 *    update still fails. */
static double reference_tolerance(gc_dtype dtype) {
    switch (dtype) {
    case GC_F64: return 1e-12;
    case GC_F16: return 1.0 / 1024;
    case GC_BF16: return 1.0 / 128;
    default: return 1e-6;
    }
}

/* The test's parameters, each with its reference values and state. */
typedef struct ref_param {
    const char *name;
    int n;
    bool no_decay;
    gc_tensor *tensor;
    double value[MAX_N];
    double state[2][MAX_N]; /* SGD's momentum buffer; AdamW's exp_avg and exp_avg_sq */
} ref_param;

/* Values exact in every float dtype (multiples of 1/8 below 2), and a gradient with zeros
 * and both signs that changes at every step. */
static double initial_value(int k, int i) { return ((i * 5 + k * 3) % 7 - 3) * 0.375; }
static double grad_value(int step, int k, int i) { return ((i * 7 + step * 3 + k * 5) % 9 - 4) * 0.25; }

/* "w" [6] (decayed), "b" [3] (no_decay), and "frozen" [2], which never gets a gradient. */
#define N_PARAMS 3
static void make_params(gc_dtype dtype, ref_param params[N_PARAMS], gc_param_list *list) {
    static const struct { const char *name; int n; bool no_decay; } shapes[N_PARAMS] = {
        {"w", 6, false}, {"b", 3, true}, {"frozen", 2, false}};
    *list = (gc_param_list){0};
    for (int k = 0; k < N_PARAMS; k++) {
        ref_param *p = &params[k];
        *p = (ref_param){.name = shapes[k].name, .n = shapes[k].n, .no_decay = shapes[k].no_decay};
        for (int i = 0; i < p->n; i++) p->value[i] = initial_value(k, i);
        p->tensor = make_param(dtype, p->n, p->value);
        gc_param_list_add(list, "", p->name, p->tensor, p->no_decay);
    }
}

/* Gives the gradients of `step` to every parameter but the frozen one. */
static void set_step_grads(ref_param params[N_PARAMS], int step, double grads[N_PARAMS][MAX_N]) {
    for (int k = 0; k + 1 < N_PARAMS; k++) {
        for (int i = 0; i < params[k].n; i++) grads[k][i] = grad_value(step, k, i);
        set_grad(params[k].tensor, grads[k]);
    }
}

static void expect_param(const ref_param *p, gc_dtype dtype, const gc_tensor *got, const double *want, double tol,
                         const char *what) {
    char label[96];
    snprintf(label, sizeof label, "%s %s %s", what, gc_dtype_name(dtype), p->name);
    gc_test_expect_values(got, got ? got->dtype : dtype, GC_SHAPE(p->n), want, tol, 0, label);
}

/* The parameter (its reference value rounded into its dtype) and, for f16 and bf16, its
 * master (the value itself, to f32 rounding); the frozen parameter exactly and masterless. */
static void expect_param_and_master(const ref_param *p, gc_dtype dtype, const gc_tensor *master, bool frozen,
                                    const char *what) {
    double stored[MAX_N];
    for (int i = 0; i < p->n; i++) stored[i] = round_to(dtype, p->value[i]);
    expect_param(p, dtype, p->tensor, stored, frozen ? 0 : reference_tolerance(dtype), what);
    bool half = dtype == GC_F16 || dtype == GC_BF16;
    CHECK_MSG((master != NULL) == (half && !frozen), "%s %s %s: master %p", what, gc_dtype_name(dtype), p->name,
              (const void *)master);
    if (master && half) expect_param(p, GC_F32, master, p->value, 1e-6, "master of");
}

/* --- SGD --- */

typedef struct sgd_config { double momentum, weight_decay; } sgd_config;

/* One SGD step of PyTorch's algorithm on the reference parameter p with gradient g. */
static void sgd_reference(ref_param *p, const double *g, sgd_config c, bool first, gc_dtype dtype) {
    double lr = to_f32(LR), momentum = to_f32(c.momentum), weight_decay = to_f32(c.weight_decay);
    for (int i = 0; i < p->n; i++) {
        double d = g[i] + weight_decay * p->value[i];
        if (momentum != 0) {
            d = first ? d : momentum * p->state[0][i] + d;
            p->state[0][i] = to_f32(d);
        }
        p->value[i] = master_value(dtype, p->value[i] - lr * d);
    }
}

static void test_sgd(gc_dtype dtype, sgd_config c) {
    ref_param params[N_PARAMS];
    gc_param_list list;
    make_params(dtype, params, &list);
    gc_sgd opt;
    CHECK(gc_sgd_init(&opt, &list, LR, c.momentum, c.weight_decay) == GC_OK);
    gc_param_list_free(&list); /* the optimizer holds its own references */
    char what[64];
    snprintf(what, sizeof what, "sgd momentum %g decay %g", c.momentum, c.weight_decay);
    for (int step = 0; step < STEPS; step++) {
        double grads[N_PARAMS][MAX_N];
        set_step_grads(params, step, grads);
        CHECK(gc_sgd_step(&opt) == GC_OK);
        for (int k = 0; k + 1 < N_PARAMS; k++) sgd_reference(&params[k], grads[k], c, step == 0, dtype);
        for (int k = 0; k < N_PARAMS; k++) /* the frozen one keeps its initial values exactly */
            expect_param_and_master(&params[k], dtype, opt.master[k], k + 1 == N_PARAMS, what);
    }
    for (int k = 0; k < N_PARAMS; k++) {
        bool has_buffer = c.momentum != 0 && k + 1 < N_PARAMS; /* none without momentum, none for "frozen" */
        CHECK_MSG((opt.momentum[k] != NULL) == has_buffer, "%s: buffer of %s", what, params[k].name);
        if (has_buffer) expect_param(&params[k], GC_F32, opt.momentum[k], params[k].state[0], 1e-6, "sgd buffer");
    }
    gc_sgd_free(&opt);
    for (int k = 0; k < N_PARAMS; k++) gc_tensor_release(params[k].tensor);
}

/* The kernel's first_step, which the optimizer's zero buffers hide (momentum 0 + g' is
 * g'): at a first step the buffer's old contents are not read. Values exact in f32. */
static void test_sgd_kernel_first_step(void) {
    float param[2] = {1, 2}, grad[2] = {0.5f, -1}, buffer[2] = {100, 100};
    gc_sgd_hyper hyper = {.lr = 0.5f, .momentum = 0.5f, .weight_decay = 0.5f, .grad_scale = 1, .first_step = true};
    gc_cpu_backend.sgd_update(param, NULL, grad, buffer, 2, GC_F32, &hyper);
    /* g' = g + p / 2 = {1, 0}; buf = g'; p -= buf / 2 */
    CHECK(buffer[0] == 1 && buffer[1] == 0);
    CHECK(param[0] == 0.5f && param[1] == 2);
    hyper.first_step = false;
    gc_cpu_backend.sgd_update(param, NULL, grad, buffer, 2, GC_F32, &hyper);
    /* g' = {0.75, 0}; buf = buf / 2 + g' = {1.25, 0}; p -= buf / 2 */
    CHECK(buffer[0] == 1.25f && buffer[1] == 0);
    CHECK(param[0] == -0.125f && param[1] == 2);
}

/* --- AdamW --- */

typedef struct adamw_config { double beta1, beta2, eps, weight_decay; } adamw_config;
static const adamw_config adamw_default = {0.9, 0.999, 1e-8, 0.1};

/* Step `step` (1-based) of AdamW as Loshchilov and Hutter write it, on the reference p. */
static void adamw_reference(ref_param *p, const double *g, adamw_config c, int64_t step, gc_dtype dtype) {
    double lr = to_f32(LR), b1 = to_f32(c.beta1), b2 = to_f32(c.beta2), eps = to_f32(c.eps);
    double weight_decay = p->no_decay ? 0 : to_f32(c.weight_decay);
    double bc1 = to_f32(1 - pow(b1, (double)step)), bc2 = to_f32(1 - pow(b2, (double)step));
    for (int i = 0; i < p->n; i++) {
        double x = p->value[i] - lr * weight_decay * p->value[i];
        double m = b1 * p->state[0][i] + (1 - b1) * g[i];
        double v = b2 * p->state[1][i] + (1 - b2) * g[i] * g[i];
        p->state[0][i] = to_f32(m);
        p->state[1][i] = to_f32(v);
        p->value[i] = master_value(dtype, x - lr * (m / bc1) / (sqrt(v / bc2) + eps));
    }
}

static void test_adamw(gc_dtype dtype) {
    ref_param params[N_PARAMS];
    gc_param_list list;
    make_params(dtype, params, &list);
    adamw_config c = adamw_default;
    gc_adamw opt;
    CHECK(gc_adamw_init(&opt, &list, LR, c.beta1, c.beta2, c.eps, c.weight_decay) == GC_OK);
    gc_param_list_free(&list);
    for (int step = 0; step < STEPS; step++) {
        double grads[N_PARAMS][MAX_N];
        set_step_grads(params, step, grads);
        CHECK(gc_adamw_step(&opt) == GC_OK);
        CHECK(opt.step == step + 1);
        for (int k = 0; k + 1 < N_PARAMS; k++) adamw_reference(&params[k], grads[k], c, step + 1, dtype);
        for (int k = 0; k < N_PARAMS; k++)
            expect_param_and_master(&params[k], dtype, opt.master[k], k + 1 == N_PARAMS, "adamw");
    }
    for (int k = 0; k + 1 < N_PARAMS; k++) {
        /* The moments are f32 values; the reference's differ from the kernel's by f32
         * rounding (f64 parameters: by the last bit of an f32 rounding at most). */
        expect_param(&params[k], GC_F32, opt.exp_avg[k], params[k].state[0], 1e-6, "adamw exp_avg");
        expect_param(&params[k], GC_F32, opt.exp_avg_sq[k], params[k].state[1], 1e-6, "adamw exp_avg_sq");
    }
    CHECK(opt.exp_avg[2] == NULL && opt.exp_avg_sq[2] == NULL); /* "frozen" never had a gradient */
    gc_adamw_free(&opt);
    for (int k = 0; k < N_PARAMS; k++) gc_tensor_release(params[k].tensor);
}

/* PyTorch's known behaviour: at the first step m / bc1 = g and sqrt(v / bc2) = |g|, so
 * without decay each parameter moves by lr g / (|g| + eps), lr sign(g) to 1e-7 for the
 * gradients here (|g| >= 0.25, eps 1e-8), and not at all where g is 0. */
static void test_adamw_first_step_is_sign(void) {
    static const double start[5] = {0.5, -1, 0.25, 2, -0.75}, grad[5] = {0.25, -3, 0, 1.5, -0.5};
    gc_tensor *p = make_param(GC_F64, 5, start);
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "p", p, false);
    gc_adamw opt;
    gc_adamw_init(&opt, &list, 0.01, 0.9, 0.999, 1e-8, 0);
    set_grad(p, grad);
    CHECK(gc_adamw_step(&opt) == GC_OK);
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = start[i] - 0.01 * (grad[i] > 0 ? 1 : grad[i] < 0 ? -1 : 0);
    /* 0.01 is an f32 hyper-parameter (1e-10 off) and the sign is 1 - 4e-8 at worst. */
    gc_test_expect_values(p, GC_F64, GC_SHAPE(5), want, 1e-9, 0, "adamw first step = lr sign(g)");
    gc_adamw_free(&opt);
    gc_param_list_free(&list);
    gc_tensor_release(p);
}

/* The f32 AdamW loop of every other instruction set this CPU has gives the portable loop's
 * bits: parameters, both moments, over a few steps of random gradients (with a scale and a
 * decay, so that every fma counts), on a length with a tail past the vector width. */
static void test_adamw_loops_same_bits(void) {
    enum { n = 1003, steps = 4 };
    static float param[GC_ISA_COUNT][n], exp_avg[GC_ISA_COUNT][n], exp_avg_sq[GC_ISA_COUNT][n], grad[n];
    gc_tensor *start = gc_test_random_in(GC_SHAPE(n), GC_F32, -2, 2, 41);
    for (int isa = 0; isa < GC_ISA_COUNT; isa++) memcpy(param[isa], gc_data(start), sizeof param[isa]);
    for (int step = 1; step <= steps; step++) {
        gc_tensor *g = gc_test_random_in(GC_SHAPE(n), GC_F32, -3, 3, 50 + (uint64_t)step);
        memcpy(grad, gc_data(g), sizeof grad);
        gc_tensor_release(g);
        gc_adamw_hyper hyper = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                                .grad_scale = 0.5f, .bias_correction1 = 1 - powf(0.9f, (float)step),
                                .bias_correction2 = 1 - powf(0.999f, (float)step)};
        for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++)
            if (gc_cpu_isa_available(isa))
                gc_cpu_adamw_f32_on(isa, param[isa], grad, exp_avg[isa], exp_avg_sq[isa], n, &hyper);
    }
    for (gc_cpu_isa isa = GC_ISA_PORTABLE + 1; isa < GC_ISA_COUNT; isa++) {
        if (!gc_cpu_isa_available(isa)) continue;
        CHECK_MSG(memcmp(param[isa], param[GC_ISA_PORTABLE], sizeof param[isa]) == 0 &&
                      memcmp(exp_avg[isa], exp_avg[GC_ISA_PORTABLE], sizeof exp_avg[isa]) == 0 &&
                      memcmp(exp_avg_sq[isa], exp_avg_sq[GC_ISA_PORTABLE], sizeof exp_avg_sq[isa]) == 0,
                  "adamw: the %s loop's parameters or moments differ from the portable loop's",
                  gc_cpu_isa_name(isa));
    }
    gc_tensor_release(start);
}

/* With a zero gradient the moments stay 0 and the Adam step is 0 / (0 + eps) = 0: a
 * decayed parameter shrinks by exactly lr wd p, a no_decay one does not move at all. */
static void test_adamw_no_decay(void) {
    static const double start[2] = {1, -2}, zero[2] = {0, 0};
    gc_tensor *decayed = make_param(GC_F64, 2, start), *kept = make_param(GC_F64, 2, start);
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "weight", decayed, false);
    gc_param_list_add(&list, "", "bias", kept, true);
    gc_adamw opt;
    gc_adamw_init(&opt, &list, 0.5, 0.9, 0.999, 1e-8, 0.25); /* lr wd = 1/8, exact in f32 */
    set_grad(decayed, zero);
    set_grad(kept, zero);
    CHECK(gc_adamw_step(&opt) == GC_OK);
    gc_test_expect_values(decayed, GC_F64, GC_SHAPE(2), (const double[]){0.875, -1.75}, 0, 0, "decayed");
    gc_test_expect_values(kept, GC_F64, GC_SHAPE(2), start, 0, 0, "no_decay");
    gc_adamw_free(&opt);
    gc_param_list_free(&list);
    RELEASE(decayed, kept);
}

/* Two parameters with the same values, given the same gradients, for two optimizers. */
typedef struct twin {
    gc_tensor *a, *b;
} twin;

static twin make_twin(int n, const double *values) {
    return (twin){make_param(GC_F32, n, values), make_param(GC_F32, n, values)};
}

/* State saved from one optimizer and loaded into a fresh one gives the same next step,
 * bit for bit (the same kernel on the same values). */
static void test_adamw_state_round_trip(void) {
    static const double w0[4] = {0.5, -1, 0.25, 2}, b0[2] = {1, -0.5};
    twin w = make_twin(4, w0), b = make_twin(2, b0);
    gc_param_list list_a = {0}, list_b = {0};
    gc_param_list_add(&list_a, "", "w", w.a, false);
    gc_param_list_add(&list_a, "", "b", b.a, true);
    gc_param_list_add(&list_b, "", "w", w.b, false);
    gc_param_list_add(&list_b, "", "b", b.b, true);
    gc_adamw first, second;
    gc_adamw_init(&first, &list_a, 0.01, 0.9, 0.99, 1e-8, 0.1);
    gc_adamw_init(&second, &list_b, 0.01, 0.9, 0.99, 1e-8, 0.1);
    double grad_w[4], grad_b[2];
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < 4; i++) grad_w[i] = grad_value(step, 0, i);
        for (int i = 0; i < 2; i++) grad_b[i] = grad_value(step, 1, i);
        set_grad(w.a, grad_w);
        set_grad(b.a, grad_b);
        CHECK(gc_adamw_step(&first) == GC_OK);
    }
    gc_param_list state = {0};
    gc_adamw_state(&first, "optim", &state);
    CHECK(state.count == 4);
    CHECK(gc_param_list_find(&state, "optim.exp_avg.w") == first.exp_avg[0]);
    CHECK(gc_param_list_find(&state, "optim.exp_avg_sq.w") == first.exp_avg_sq[0]);
    CHECK(gc_param_list_find(&state, "optim.exp_avg.b") == first.exp_avg[1]);
    CHECK(gc_param_list_find(&state, "optim.exp_avg_sq.b") == first.exp_avg_sq[1]);

    /* The second optimizer takes over: parameters copied, state loaded. */
    REQUIRE(gc_copy_(w.b, w.a) == GC_OK && gc_copy_(b.b, b.a) == GC_OK);
    CHECK(gc_adamw_load_state(&second, "optim", &state, first.step) == GC_OK);
    gc_param_list_free(&state);
    CHECK(second.step == 2);
    CHECK(second.exp_avg[0] != first.exp_avg[0]); /* a copy, not the first one's tensor */
    for (int i = 0; i < 4; i++) grad_w[i] = grad_value(2, 0, i);
    for (int i = 0; i < 2; i++) grad_b[i] = grad_value(2, 1, i);
    set_grad(w.a, grad_w);
    set_grad(b.a, grad_b);
    set_grad(w.b, grad_w);
    set_grad(b.b, grad_b);
    CHECK(gc_adamw_step(&first) == GC_OK && gc_adamw_step(&second) == GC_OK);
    gc_test_expect_close(w.a, w.b, 0, 0, "w after the loaded step");
    gc_test_expect_close(b.a, b.b, 0, 0, "b after the loaded step");
    for (int k = 0; k < 2; k++) {
        gc_test_expect_close(first.exp_avg[k], second.exp_avg[k], 0, 0, "exp_avg after the loaded step");
        gc_test_expect_close(first.exp_avg_sq[k], second.exp_avg_sq[k], 0, 0, "exp_avg_sq after the loaded step");
    }

    /* An empty prefix names the entries by kind and parameter alone. */
    gc_param_list bare = {0};
    gc_adamw_state(&first, "", &bare);
    CHECK(gc_param_list_find(&bare, "exp_avg_sq.b") == first.exp_avg_sq[1]);
    gc_param_list_free(&bare);

    gc_adamw_free(&first);
    gc_adamw_free(&second);
    gc_param_list_free(&list_a);
    gc_param_list_free(&list_b);
    RELEASE(w.a, w.b, b.a, b.b);
}

/* A malformed state (a moment missing, a wrong shape) is GC_ERR_FORMAT naming the entry,
 * and changes nothing. */
static void test_adamw_load_errors(void) {
    gc_tensor *w = make_param(GC_F32, 4, (const double[]){1, 2, 3, 4});
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "w", w, false);
    gc_adamw opt;
    gc_adamw_init(&opt, &list, 0.01, 0.9, 0.999, 1e-8, 0);
    gc_tensor *right = gc_zeros(GC_SHAPE(4), GC_F32, cpu), *wrong = gc_zeros(GC_SHAPE(2, 2), GC_F32, cpu);
    REQUIRE(right && wrong);

    gc_param_list half = {0};
    gc_param_list_add(&half, "", "o.exp_avg.w", right, false);
    CHECK(gc_adamw_load_state(&opt, "o", &half, 7) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "'o.exp_avg_sq.w' is missing") != NULL, "message: %s", gc_last_error());
    CHECK(opt.exp_avg[0] == NULL && opt.step == 0);

    gc_param_list_add(&half, "", "o.exp_avg_sq.w", wrong, false);
    CHECK(gc_adamw_load_state(&opt, "o", &half, 7) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "'o.exp_avg_sq.w' is [2, 2] f32 cpu, want [4] f32") != NULL, "message: %s",
              gc_last_error());
    CHECK(opt.exp_avg[0] == NULL && opt.step == 0);

    /* Neither entry: the parameter simply has no state yet. */
    CHECK(gc_adamw_load_state(&opt, "elsewhere", &half, 7) == GC_OK);
    CHECK(opt.exp_avg[0] == NULL && opt.step == 7);

    /* The second moment's copy does not fit: the first one is released again. */
    gc_tensor *squares = gc_test_tensor(GC_F32, GC_SHAPE(4), (const double[]){1, 4, 9, 16});
    gc_param_list full = {0};
    gc_param_list_add(&full, "", "o.exp_avg.w", right, false);
    gc_param_list_add(&full, "", "o.exp_avg_sq.w", squares, false);
    size_t base = gc_memory_get_stats(cpu).live_bytes;
    gc_memory_set_limit(cpu, base + 4 * sizeof(float)); /* room for one [4] f32 copy */
    CHECK(gc_adamw_load_state(&opt, "o", &full, 3) == GC_ERR_MEM_LIMIT);
    CHECK(gc_memory_get_stats(cpu).live_bytes == base);
    gc_memory_set_limit(cpu, 0);
    CHECK(opt.exp_avg[0] == NULL && opt.step == 7);
    CHECK(gc_adamw_load_state(&opt, "o", &full, 3) == GC_OK);
    CHECK(opt.step == 3);
    gc_test_expect_values(opt.exp_avg_sq[0], GC_F32, GC_SHAPE(4), (const double[]){1, 4, 9, 16}, 0, 0, "loaded");
    CHECK(opt.exp_avg_sq[0] != squares); /* a copy */

    /* A step count past 2^53 (a damaged checkpoint's) would overflow the next step: refused. */
    CHECK(gc_adamw_load_state(&opt, "o", &full, INT64_MAX) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "step 9223372036854775807 is beyond the largest count, 2^53") != NULL,
              "message: %s", gc_last_error());
    CHECK(opt.step == 3);
    CHECK(gc_adamw_load_state(&opt, "o", &full, GC_ADAMW_MAX_STEP) == GC_OK && opt.step == GC_ADAMW_MAX_STEP);
    gc_clear_error();
    gc_param_list_free(&half);
    gc_param_list_free(&full);
    gc_adamw_free(&opt);
    gc_param_list_free(&list);
    RELEASE(w, right, wrong, squares);
}

/* --- allocation failures: the state of the second parameter does not fit --- */

static void test_allocation_failure(void) {
    double values[64], grads[64];
    for (int i = 0; i < 64; i++) {
        values[i] = i * 0.125;
        grads[i] = (i % 5 - 2) * 0.5;
    }
    gc_tensor *w = make_param(GC_F32, 64, values), *b = make_param(GC_F32, 64, values);
    set_grad(w, grads);
    set_grad(b, grads);
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "w", w, false);
    gc_param_list_add(&list, "", "b", b, false);
    gc_adamw adamw;
    gc_sgd sgd;
    gc_adamw_init(&adamw, &list, 0.01, 0.9, 0.999, 1e-8, 0.1);
    gc_sgd_init(&sgd, &list, 0.01, 0.9, 0.1);
    size_t base = gc_memory_get_stats(cpu).live_bytes;
    const size_t state_bytes = 64 * sizeof(float);

    gc_memory_set_limit(cpu, base + 2 * state_bytes + 100); /* w's two moments fit, b's do not */
    CHECK(gc_adamw_step(&adamw) == GC_ERR_MEM_LIMIT);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    CHECK(adamw.step == 0);
    CHECK(adamw.exp_avg[0] == NULL && adamw.exp_avg_sq[0] == NULL && adamw.exp_avg[1] == NULL);

    gc_memory_set_limit(cpu, base + state_bytes + 100); /* w's buffer fits, b's does not */
    CHECK(gc_sgd_step(&sgd) == GC_ERR_MEM_LIMIT);
    CHECK(sgd.momentum[0] == NULL && sgd.momentum[1] == NULL);

    CHECK(gc_memory_get_stats(cpu).live_bytes == base); /* everything allocated was released */
    gc_memory_set_limit(cpu, 0);
    gc_clear_error();
    gc_test_expect_values(w, GC_F32, GC_SHAPE(64), values, 0, 0, "w untouched by the failed steps");
    gc_test_expect_values(b, GC_F32, GC_SHAPE(64), values, 0, 0, "b untouched by the failed steps");
    CHECK(gc_adamw_step(&adamw) == GC_OK && adamw.step == 1);
    CHECK(gc_memory_get_stats(cpu).live_bytes == base + 4 * state_bytes);
    gc_adamw_free(&adamw);
    gc_sgd_free(&sgd);
    gc_param_list_free(&list);
    RELEASE(w, b);
}

/* --- gradient clipping --- */

static void test_clip_grad_norm(void) {
    gc_tensor *a = make_param(GC_F32, 2, (const double[]){1, 1}), *b = make_param(GC_F64, 1, (const double[]){1});
    gc_tensor *frozen = make_param(GC_F32, 1, (const double[]){1});
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "a", a, false);
    gc_param_list_add(&list, "", "b", b, false);
    gc_param_list_add(&list, "", "frozen", frozen, false); /* no gradient: left out */
    set_grad(a, (const double[]){3, -4});
    set_grad(b, (const double[]){12});

    /* sqrt(9 + 16 + 144) = 13: below the threshold nothing changes, exactly. */
    CHECK_NEAR(gc_clip_grad_norm(&list, 26), 13, 0, 0);
    gc_test_expect_values(gc_grad(a), GC_F32, GC_SHAPE(2), (const double[]){3, -4}, 0, 0, "unclipped a");
    gc_test_expect_values(gc_grad(b), GC_F64, GC_SHAPE(1), (const double[]){12}, 0, 0, "unclipped b");
    CHECK_NEAR(gc_clip_grad_norm(&list, 13), 13, 0, 0); /* equal is not above */

    /* Above: scaled by 6.5 / (13 + 1e-6), half the gradient less 7.7e-8 of it. */
    CHECK_NEAR(gc_clip_grad_norm(&list, 6.5), 13, 0, 0);
    double scale = 6.5 / (13 + 1e-6);
    /* a is scaled in f32 (by the f32 scale): 2^-24 of relative error, twice */
    gc_test_expect_values(gc_grad(a), GC_F32, GC_SHAPE(2), (const double[]){3 * scale, -4 * scale}, 0, 2.5e-7, "a");
    gc_test_expect_values(gc_grad(b), GC_F64, GC_SHAPE(1), (const double[]){12 * scale}, 0, 1e-15, "b");
    CHECK_NEAR(gc_clip_grad_norm(&list, 100), 6.5, 0, 1e-6); /* the new norm, 13 scale */
    gc_param_list_free(&list);
    RELEASE(a, b, frozen);

    /* f16 and bf16 gradients are squared in f32: 300^2 overflows f16 (max 65504). */
    gc_tensor *h = make_param(GC_F16, 2, (const double[]){0, 0}), *bh = make_param(GC_BF16, 1, (const double[]){0});
    gc_param_list halves = {0};
    gc_param_list_add(&halves, "", "h", h, false);
    gc_param_list_add(&halves, "", "bh", bh, false);
    set_grad(h, (const double[]){300, -400});
    set_grad(bh, (const double[]){1200});
    CHECK_NEAR(gc_clip_grad_norm(&halves, 1e9), 1300, 0, 0); /* 90000 + 160000 + 1440000 = 1300^2 */

    /* An allocation failure returns nan, records the error and scales nothing. */
    gc_memory_set_limit(cpu, gc_memory_get_stats(cpu).live_bytes + 1);
    CHECK(isnan(gc_clip_grad_norm(&halves, 1)));
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    gc_memory_set_limit(cpu, 0);
    gc_clear_error();
    gc_test_expect_values(gc_grad(h), GC_F16, GC_SHAPE(2), (const double[]){300, -400}, 0, 0, "h untouched");
    gc_param_list_free(&halves);
    RELEASE(h, bh);
}

static void test_scale_inplace(void) {
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(3), (const double[]){1, -2, 0.5});
    gc_scale_inplace(x, -3);
    gc_test_expect_values(x, GC_F32, GC_SHAPE(3), (const double[]){-3, 6, -1.5}, 0, 0, "scale f32");
    /* bf16 (8 significant bits) is computed in f32 and rounded once: 1.5 (1 + 2^-8) =
     * 1.505859375 rounds to 1.5078125 (1.5 + 2^-7); a scale rounded to bf16 first would be
     * 1 (a tie to even) and leave 1.5. */
    gc_tensor *y = gc_test_tensor(GC_BF16, GC_SHAPE(1), (const double[]){1.5});
    gc_scale_inplace(y, 1 + 1.0 / 256);
    gc_test_expect_values(y, GC_BF16, GC_SHAPE(1), (const double[]){1.5078125}, 0, 0, "scale bf16");
    gc_scale_inplace(NULL, 2); /* error chaining: a no-op */
    RELEASE(x, y);
}

/* --- learning-rate schedules --- */

static void test_lr_schedule(void) {
    gc_lr_schedule s = {.peak = 1, .min = 0.1, .warmup_steps = 4, .total_steps = 14, .decay = GC_LR_LINEAR};
    const gc_lr_decay decays[3] = {GC_LR_CONSTANT, GC_LR_LINEAR, GC_LR_COSINE};
    /* warm-up, identical for every decay: peak (s + 1) / 4 */
    for (int d = 0; d < 3; d++) {
        s.decay = decays[d];
        CHECK_NEAR(gc_lr_at(&s, 0), 0.25, 0, 1e-15);
        CHECK_NEAR(gc_lr_at(&s, 1), 0.5, 0, 1e-15);
        CHECK_NEAR(gc_lr_at(&s, 3), 1, 0, 1e-15);
        CHECK_NEAR(gc_lr_at(&s, 4), 1, 0, 1e-15); /* the decays start at peak */
    }
    s.decay = GC_LR_CONSTANT;
    CHECK_NEAR(gc_lr_at(&s, 9), 1, 0, 1e-15);
    CHECK_NEAR(gc_lr_at(&s, 1000), 1, 0, 1e-15);
    s.decay = GC_LR_LINEAR; /* t = (s - 4) / 10 */
    CHECK_NEAR(gc_lr_at(&s, 9), 0.55, 0, 1e-15);  /* 1 - 0.9 * 0.5 */
    CHECK_NEAR(gc_lr_at(&s, 13), 0.19, 0, 1e-14); /* 1 - 0.9 * 0.9 */
    CHECK_NEAR(gc_lr_at(&s, 14), 0.1, 0, 0);
    CHECK_NEAR(gc_lr_at(&s, 1000), 0.1, 0, 0);
    s.decay = GC_LR_COSINE;
    CHECK_NEAR(gc_lr_at(&s, 9), 0.55, 0, 1e-15);                 /* cos(pi / 2) = 0: halfway */
    CHECK_NEAR(gc_lr_at(&s, 6), 0.1 + 0.45 * (1 + 0.80901699437494742), 0, 1e-15); /* cos(pi / 5) */
    CHECK_NEAR(gc_lr_at(&s, 14), 0.1, 0, 0);
    CHECK_NEAR(gc_lr_at(&s, 20), 0.1, 0, 0);
    /* no warm-up: peak from step 0; no decay phase (total = warmup): min from there */
    gc_lr_schedule flat = {.peak = 0.5, .min = 0, .warmup_steps = 0, .total_steps = 10, .decay = GC_LR_COSINE};
    CHECK_NEAR(gc_lr_at(&flat, 0), 0.5, 0, 0);
    gc_lr_schedule none = {.peak = 0.5, .min = 0.01, .warmup_steps = 2, .total_steps = 2, .decay = GC_LR_LINEAR};
    CHECK_NEAR(gc_lr_at(&none, 1), 0.5, 0, 0);
    CHECK_NEAR(gc_lr_at(&none, 2), 0.01, 0, 0);
}

/* --- learning: AdamW with a cosine schedule minimises sum((p - target)^2) --- */

static void test_adamw_learns_quadratic(void) {
    static const double target_values[4] = {1, -2, 0.5, 3}, start[4] = {0, 0, 0, 0};
    gc_tensor *p = make_param(GC_F32, 4, start);
    gc_tensor *target = gc_test_tensor(GC_F32, GC_SHAPE(4), target_values);
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "p", p, false);
    gc_adamw opt;
    gc_adamw_init(&opt, &list, 0, 0.9, 0.999, 1e-8, 0);
    gc_lr_schedule schedule = {.peak = 0.1, .min = 0, .warmup_steps = 10, .total_steps = 1000, .decay = GC_LR_COSINE};
    double loss_value = 0;
    for (int64_t step = 0; step < schedule.total_steps; step++) {
        gc_tensor *diff = gc_sub(p, target);
        gc_tensor *squares = gc_mul(diff, diff);
        gc_tensor *loss = gc_sum_all(squares);
        REQUIRE(loss && gc_backward(&loss, NULL, 1) == GC_OK);
        loss_value = gc_item(loss);
        RELEASE(diff, squares, loss);
        opt.lr = gc_lr_at(&schedule, step);
        CHECK(gc_adamw_step(&opt) == GC_OK);
        gc_param_list_zero_grad(&list);
    }
    fprintf(stderr, "quadratic: loss %.3g after %lld AdamW steps\n", loss_value, (long long)schedule.total_steps);
    CHECK(loss_value < 1e-6);
    gc_adamw_free(&opt);
    gc_param_list_free(&list);
    RELEASE(p, target);
}

/* --- programmer errors --- */

static void bad_adamw_beta(void *unused) {
    (void)unused;
    gc_adamw opt;
    gc_adamw_init(&opt, &(gc_param_list){0}, 0.01, 1.0, 0.999, 1e-8, 0);
}

static void bad_sgd_lr(void *unused) {
    (void)unused;
    gc_sgd opt;
    gc_sgd_init(&opt, &(gc_param_list){0}, -0.1, 0, 0);
}

/* A gradient that does not match its parameter (which autograd never makes: the header is
 * altered here to reach the check). */
static void mismatched_grad(void *unused) {
    (void)unused;
    gc_tensor *w = make_param(GC_F32, 6, (const double[]){1, 2, 3, 4, 5, 6});
    set_grad(w, (const double[]){1, 1, 1, 1, 1, 1});
    gc_tensor *grad = gc_grad(w);
    grad->ndim = 2;
    grad->shape[0] = 2;
    grad->shape[1] = 3;
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "w", w, false);
    gc_sgd opt;
    gc_sgd_init(&opt, &list, 0.1, 0, 0);
    gc_sgd_step(&opt);
}

static void negative_max_norm(void *unused) {
    (void)unused;
    gc_clip_grad_norm(&(gc_param_list){0}, -1);
}

static void negative_step(void *unused) {
    (void)unused;
    gc_lr_at(&(gc_lr_schedule){.peak = 1, .warmup_steps = 1, .total_steps = 2, .decay = GC_LR_LINEAR}, -1);
}

static void total_before_warmup(void *unused) {
    (void)unused;
    gc_lr_at(&(gc_lr_schedule){.peak = 1, .warmup_steps = 5, .total_steps = 2, .decay = GC_LR_COSINE}, 0);
}

static void scale_ints(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2), GC_I32, cpu);
    gc_scale_inplace(x, 2);
}

int main(void) {
    const gc_dtype dtypes[4] = {GC_F32, GC_F16, GC_BF16, GC_F64};
    for (int d = 0; d < 4; d++) {
        test_sgd(dtypes[d], (sgd_config){0, 0});
        test_sgd(dtypes[d], (sgd_config){0.9, 0});
        test_sgd(dtypes[d], (sgd_config){0.9, 0.1});
        test_sgd(dtypes[d], (sgd_config){0, 0.1});
        test_adamw(dtypes[d]);
    }
    test_sgd_kernel_first_step();
    test_adamw_first_step_is_sign();
    test_adamw_loops_same_bits();
    test_adamw_no_decay();
    test_adamw_state_round_trip();
    test_adamw_load_errors();
    test_allocation_failure();
    test_clip_grad_norm();
    test_scale_inplace();
    test_lr_schedule();
    test_adamw_learns_quadratic();
    gc_test_expect_fatal(bad_adamw_beta, NULL,
                         "adamw_init: lr 0.01, eps 1e-08 and weight_decay 0 must be >= 0 and beta1 1");
    gc_test_expect_fatal(bad_sgd_lr, NULL, "sgd_init: lr -0.1");
    gc_test_expect_fatal(mismatched_grad, NULL,
                         "sgd: the gradient [2, 3] f32 cpu of parameter 'w' does not match the parameter [6] f32 cpu");
    gc_test_expect_fatal(negative_max_norm, NULL, "clip_grad_norm: max_norm -1");
    gc_test_expect_fatal(negative_step, NULL, "lr_at: step -1");
    gc_test_expect_fatal(total_before_warmup, NULL, "lr_at: step 0 with warmup_steps 5 and total_steps 2");
    gc_test_expect_fatal(scale_ints, NULL, "scale_inplace");
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
