/* Autograd costs, measured side by side in one run:
 *  1. the tape's overhead per op on tiny tensors (CPU): the same chain of ops with grad
 *     mode off and on, and the backward over it;
 *  2. forward + backward of a 4-layer MLP against its forward alone, on the CPU and, when
 *     a GPU is present, on CUDA.
 * Times are medians of several repetitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

static void fail(const char *what) {
    fprintf(stderr, "bench_autograd: %s: %s\n", what, gc_last_error());
    exit(1);
}

/* --- 1. tape overhead --- */

#define CHAIN 2000

/* Seconds for a chain of CHAIN tiny ops, and (if backward_seconds) its backward. */
static double tiny_chain(bool grad, double *backward_seconds) {
    gc_tensor *x = gc_ones(GC_SHAPE(1), GC_F32, gc_cpu());
    if (!x) fail("tiny input");
    gc_set_requires_grad(x, true);
    bool previous = gc_set_grad_enabled(grad);
    double start = gc_seconds();
    gc_tensor *h = gc_tensor_retain(x);
    for (int i = 0; i < CHAIN; i++) {
        gc_tensor *next = gc_mul_scalar(h, 1.0001);
        gc_tensor_release(h);
        h = next;
    }
    double forward = gc_seconds() - start;
    gc_set_grad_enabled(previous);
    if (backward_seconds) {
        start = gc_seconds();
        if (gc_backward(&h, NULL, 1) != GC_OK) fail("backward");
        *backward_seconds = gc_seconds() - start;
    }
    gc_tensor_release(h);
    gc_tensor_release(x);
    return forward;
}

static void tape_overhead(int reps) {
    double plain[32], taped[32], backward[32];
    for (int r = 0; r < reps; r++) {
        plain[r] = tiny_chain(false, NULL);
        taped[r] = tiny_chain(true, &backward[r]);
    }
    double p = gc_median(plain, reps), t = gc_median(taped, reps), b = gc_median(backward, reps);
    printf("tape overhead, a chain of %d mul_scalar ops on [1] f32 tensors (CPU):\n", CHAIN);
    printf("  no grad     %7.3f us/op\n", 1e6 * p / CHAIN);
    printf("  recorded    %7.3f us/op   (x%.2f of no grad: %.3f us/op of tape)\n", 1e6 * t / CHAIN, t / p,
           1e6 * (t - p) / CHAIN);
    printf("  backward    %7.3f us/op\n\n", 1e6 * b / CHAIN);
}

/* --- 2. MLP forward + backward --- */

#define LAYERS 4

typedef struct mlp {
    gc_tensor *weight[LAYERS]; /* [width, width] */
    gc_tensor *bias[LAYERS];   /* [width] */
} mlp;

static mlp make_mlp(int64_t width, gc_device device) {
    mlp model;
    for (int i = 0; i < LAYERS; i++) {
        model.weight[i] = gc_uniform(GC_SHAPE(width, width), GC_F32, device, -0.05, 0.05, 10 + (uint64_t)i, 0);
        model.bias[i] = gc_zeros(GC_SHAPE(width), GC_F32, device);
        if (!model.weight[i] || !model.bias[i]) fail("parameters");
        gc_set_requires_grad(model.weight[i], true);
        gc_set_requires_grad(model.bias[i], true);
    }
    return model;
}

static gc_tensor *mlp_loss(const mlp *model, const gc_tensor *x) {
    gc_tensor *h = gc_tensor_retain((gc_tensor *)x);
    for (int i = 0; i < LAYERS; i++) {
        gc_tensor *linear = gc_matmul(h, model->weight[i], false, false);
        gc_tensor *shifted = gc_add(linear, model->bias[i]);
        gc_tensor_release(h);
        gc_tensor_release(linear);
        h = gc_gelu_tanh(shifted);
        gc_tensor_release(shifted);
    }
    gc_tensor *loss = gc_mean_all(h);
    gc_tensor_release(h);
    if (!loss) fail("forward");
    return loss;
}

static void mlp_step_times(int64_t batch, int64_t width, gc_device device, int reps) {
    mlp model = make_mlp(width, device);
    gc_tensor *x = gc_uniform(GC_SHAPE(batch, width), GC_F32, device, -1, 1, 1, 0);
    if (!x) fail("input");
    double forward[32], step[32];
    for (int r = 0; r < reps + 1; r++) { /* the first repetition warms up caches and cuBLAS */
        bool previous = gc_set_grad_enabled(false);
        gc_device_synchronize(device);
        double start = gc_seconds();
        gc_tensor *loss = mlp_loss(&model, x);
        gc_device_synchronize(device);
        double forward_time = gc_seconds() - start;
        gc_tensor_release(loss);
        gc_set_grad_enabled(previous);

        start = gc_seconds();
        loss = mlp_loss(&model, x);
        if (gc_backward(&loss, NULL, 1) != GC_OK) fail("backward");
        gc_device_synchronize(device);
        double step_time = gc_seconds() - start;
        gc_tensor_release(loss);
        for (int i = 0; i < LAYERS; i++) {
            gc_zero_grad(model.weight[i]);
            gc_zero_grad(model.bias[i]);
        }
        if (r > 0) {
            forward[r - 1] = forward_time;
            step[r - 1] = step_time;
        }
    }
    double f = gc_median(forward, reps), s = gc_median(step, reps);
    char name[16];
    double flops = 2.0 * batch * width * width * LAYERS;
    printf("  %-7s [%lld x %lld], %d layers: forward %8.3f ms (%6.1f GFLOP/s), forward+backward %8.3f ms = x%.2f of forward\n",
           gc_device_str(device, name, sizeof name), (long long)batch, (long long)width, LAYERS, 1e3 * f, flops / f / 1e9,
           1e3 * s, s / f);
    gc_tensor_release(x);
    for (int i = 0; i < LAYERS; i++) {
        gc_tensor_release(model.weight[i]);
        gc_tensor_release(model.bias[i]);
    }
}

int main(int argc, char **argv) {
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else {
            printf("usage: %s [--reps N]\n"
                   "Measures the autograd tape's overhead per op, and forward+backward against forward\n"
                   "for a 4-layer MLP (CPU, and CUDA when a GPU is present). N: 1 to 32, default 5.\n",
                   argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    if (reps < 1 || reps > 32) {
        fprintf(stderr, "bench_autograd: --reps must be 1 to 32\n");
        return 2;
    }
    tape_overhead(reps);
    printf("MLP forward and forward+backward (theory: backward ~ 2x forward, so ~x3):\n");
    mlp_step_times(256, 256, gc_cpu(), reps);
    if (gc_cuda_device_count() > 0) {
        mlp_step_times(256, 256, gc_cuda(0), reps);
        mlp_step_times(8192, 2048, gc_cuda(0), reps);
    }
    return 0;
}
