/* The optimizers and gradient clipping on CUDA against the same steps on the CPU, for
 * every float dtype and sizes from 1 to 10^6 (several grid-stride passes); f16 and bf16 with
 * their f32 masters (the default) and without, and scaled steps (a loss scale's unscaling
 * folded into the update).
 *
 * The updates are compared exactly: both backends evaluate the one formula of
 * tensor/optim_impl.h with correctly rounded operations only (explicit fma; IEEE division
 * and square root, which nvcc emits unless built with -use_fast_math; no flush of
 * subnormals on either side) and round once into the dtype, so every bit must agree. The
 * gradients are exact on both devices too (a seed of ones times the same values). */
#include "check.h"

#define STEPS 3

static const gc_device cpu = {GC_DEVICE_CPU, 0};
static const gc_device cuda = {GC_DEVICE_CUDA, 0};


/* Makes `values` (a CPU tensor of p's shape and dtype) the gradient of p: the backward of
 * p * values from a seed of ones. */
static void set_grad(gc_tensor *p, const gc_tensor *values) {
    gc_zero_grad(p);
    gc_tensor *factor = gc_to_device(values, p->device);
    gc_tensor *product = gc_mul(p, factor);
    gc_tensor *seed = gc_ones(p->ndim, p->shape, p->dtype, p->device);
    REQUIRE(product && seed && gc_backward(&product, &seed, 1) == GC_OK);
    RELEASE(factor, product, seed);
}

typedef enum optimizer_kind { SGD_PLAIN, SGD_MOMENTUM, ADAMW } optimizer_kind;
static const char *const kind_names[3] = {"sgd", "sgd with momentum", "adamw"};

/* One optimizer of either kind over a device's parameters. */
typedef struct optimizer {
    optimizer_kind kind;
    gc_sgd sgd;
    gc_adamw adamw;
} optimizer;

/* How the steps are taken: with masters or not (f16 and bf16), and the grad_scale of a step
 * whose gradients were multiplied by 1 / grad_scale first. */
typedef struct variant {
    bool master_weights;
    double grad_scale;
} variant;

static optimizer make_optimizer(optimizer_kind kind, const gc_param_list *params, variant v) {
    optimizer opt = {.kind = kind};
    if (kind == ADAMW) {
        gc_adamw_init(&opt.adamw, params, 0.01, 0.9, 0.999, 1e-8, 0.1);
        opt.adamw.master_weights = v.master_weights;
    } else {
        gc_sgd_init(&opt.sgd, params, 0.05, kind == SGD_MOMENTUM ? 0.9 : 0, 0.01);
        opt.sgd.master_weights = v.master_weights;
    }
    return opt;
}

static gc_status step(optimizer *opt, double grad_scale) {
    return opt->kind == ADAMW ? gc_adamw_step_scaled(&opt->adamw, grad_scale)
                              : gc_sgd_step_scaled(&opt->sgd, grad_scale);
}

/* State tensor `k` of parameter `index` (NULL where the kind keeps none); k = 2: the master. */
static gc_tensor *state(const optimizer *opt, int k, int index) {
    if (k == 2) return (opt->kind == ADAMW ? opt->adamw.master : opt->sgd.master)[index];
    if (opt->kind == ADAMW) return (k == 0 ? opt->adamw.exp_avg : opt->adamw.exp_avg_sq)[index];
    return k == 0 && opt->kind == SGD_MOMENTUM ? opt->sgd.momentum[index] : NULL;
}

static void free_optimizer(optimizer *opt) {
    if (opt->kind == ADAMW) gc_adamw_free(&opt->adamw);
    else gc_sgd_free(&opt->sgd);
}

/* "w" [n] with weight decay and "b" [7] without, the same values on both devices, stepped
 * STEPS times with the same random gradients (times 1 / grad_scale). */
static void compare_steps(optimizer_kind kind, gc_dtype dtype, int64_t n, variant v) {
    gc_tensor *host[2] = {gc_test_random(GC_SHAPE(n), dtype, 1), gc_test_random(GC_SHAPE(7), dtype, 2)};
    gc_tensor *params[2][2]; /* [device][param] */
    gc_param_list lists[2] = {{0}, {0}};
    optimizer opts[2];
    const gc_device devices[2] = {cpu, cuda};
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 2; k++) {
            params[d][k] = gc_to_device(host[k], devices[d]);
            REQUIRE(params[d][k]);
            gc_set_requires_grad(params[d][k], true);
        }
        gc_param_list_add(&lists[d], "", "w", params[d][0], false);
        gc_param_list_add(&lists[d], "", "b", params[d][1], true);
        opts[d] = make_optimizer(kind, &lists[d], v);
        gc_param_list_free(&lists[d]);
    }
    char what[128];
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < 2; k++) {
            double scale = 1 / v.grad_scale;
            gc_tensor *grad = gc_test_random_in(params[0][k]->ndim, params[0][k]->shape, dtype, -scale, scale,
                                                10 + 2 * (uint64_t)s + k);
            set_grad(params[0][k], grad);
            set_grad(params[1][k], grad);
            gc_tensor_release(grad);
        }
        CHECK(step(&opts[0], v.grad_scale) == GC_OK && step(&opts[1], v.grad_scale) == GC_OK);
        for (int k = 0; k < 2; k++) {
            snprintf(what, sizeof what, "%s %s n=%lld step %d param %d masters %d grad_scale %g", kind_names[kind],
                     gc_dtype_name(dtype), (long long)n, s, k, v.master_weights, v.grad_scale);
            gc_test_expect_close(params[0][k], params[1][k], 0, 0, what);
            bool half = dtype == GC_F16 || dtype == GC_BF16;
            CHECK_MSG((state(&opts[1], 2, k) != NULL) == (half && v.master_weights), "%s: master", what);
            for (int j = 0; j < 3; j++) {
                gc_tensor *want = state(&opts[0], j, k), *got = state(&opts[1], j, k);
                CHECK_MSG((want == NULL) == (got == NULL), "%s: state %d", what, j);
                if (!want || !got) continue;
                CHECK_MSG(gc_device_equal(got->device, cuda) && got->dtype == GC_F32, "%s: state %d", what, j);
                gc_test_expect_close(want, got, 0, 0, what);
            }
        }
    }
    for (int d = 0; d < 2; d++) {
        free_optimizer(&opts[d]);
        RELEASE(params[d][0], params[d][1]);
    }
    RELEASE(host[0], host[1]);
}

/* Clipping on both devices: the totals agree to the f32 summation order (CPU: in double,
 * rounded once; CUDA: an f32 tree, some log2(10^6) = 20 roundings of 2^-24, 1.2e-6 at
 * worst), and so do the scale factors; each gradient is then scaled in f32 and rounded to
 * its dtype, within gc_test_tolerance. */
static void compare_clip(gc_dtype dtype, int64_t n) {
    gc_tensor *host_grads[2] = {gc_test_random(GC_SHAPE(n), dtype, 3), gc_test_random(GC_SHAPE(5, 3), dtype, 4)};
    gc_tensor *params[2][2];
    gc_param_list lists[2] = {{0}, {0}};
    const gc_device devices[2] = {cpu, cuda};
    double totals[2];
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 2; k++) {
            params[d][k] = gc_zeros(host_grads[k]->ndim, host_grads[k]->shape, dtype, devices[d]);
            REQUIRE(params[d][k]);
            gc_set_requires_grad(params[d][k], true);
            set_grad(params[d][k], host_grads[k]);
        }
        gc_param_list_add(&lists[d], "", "a", params[d][0], false);
        gc_param_list_add(&lists[d], "", "b", params[d][1], false);
        totals[d] = gc_clip_grad_norm(&lists[d], 1.0);
    }
    char what[96];
    snprintf(what, sizeof what, "clip %s n=%lld", gc_dtype_name(dtype), (long long)n);
    CHECK_MSG(fabs(totals[1] - totals[0]) <= 1e-5 * totals[0], "%s: total %.9g on CUDA, %.9g on the CPU", what,
              totals[1], totals[0]);
    for (int k = 0; k < 2; k++)
        gc_test_expect_close(gc_grad(params[0][k]), gc_grad(params[1][k]), 0, gc_test_tolerance(dtype), what);
    for (int d = 0; d < 2; d++) {
        gc_param_list_free(&lists[d]);
        RELEASE(params[d][0], params[d][1]);
    }
    RELEASE(host_grads[0], host_grads[1]);
}

int main(void) {
    gc_test_require_cuda();
    const gc_dtype dtypes[4] = {GC_F32, GC_F16, GC_BF16, GC_F64};
    const int64_t sizes[4] = {1, 7, 4097, 1000000};
    const variant variants[3] = {{true, 1}, {false, 1}, {true, 1.0 / 1024}};
    for (int d = 0; d < 4; d++)
        for (int s = 0; s < 4; s++) {
            for (int k = 0; k < 3; k++)
                for (int v = 0; v < 3; v++) compare_steps((optimizer_kind)k, dtypes[d], sizes[s], variants[v]);
            compare_clip(dtypes[d], sizes[s]);
        }
    return gc_test_result();
}
