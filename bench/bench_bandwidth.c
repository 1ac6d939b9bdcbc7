/* The memory-bound kernels against the device's copy bandwidth, measured side by side in one
 * run: each kernel's effective bandwidth (the fewest bytes it must move, each input read once
 * and each output written once, over its time) as a fraction of a device-to-device copy's
 * (bytes read + written). The target on a GPU: at least 70% for elementwise ops,
 * dropout and AdamW.
 *
 * Each kernel runs --reps times back to back on tensors of --mib MiB (f32 unless said), after
 * one warm-up; a GPU's launches queue up, so the time is the wall clock of the burst, ended by a
 * synchronisation, over the count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"
#include "tensor/backend.h"
#include "tensor/op_internal.h"

static gc_tensor *checked(gc_tensor *t) {
    if (!t) {
        fprintf(stderr, "bench_bandwidth: %s\n", gc_last_error());
        exit(1);
    }
    return t;
}

typedef struct workload {
    gc_device device;
    int64_t n;          /* elements of each f32 operand */
    gc_tensor *a, *b;   /* f32 [n], uniform in [-1, 1) */
    gc_tensor *rows;    /* a seen as [n / 1024, 1024], for the row kernels */
    gc_tensor *m, *v;   /* f32 [n]: AdamW state */
    gc_tensor *a16;     /* a as bf16 */
    int reps;
} workload;

/* One kernel run; returns what it allocated (released by the caller), NULL for in-place. */
typedef gc_tensor *(*kernel_run)(workload *w);

static gc_tensor *run_copy(workload *w) { return gc_clone(w->a); }
static gc_tensor *run_add(workload *w) { return gc_add(w->a, w->b); }
static gc_tensor *run_mul_scalar(workload *w) { return gc_mul_scalar(w->a, 0.5); }
static gc_tensor *run_gelu(workload *w) { return gc_gelu_erf(w->a); }
/* the derivative, as gelu's backward rule calls it */
static gc_tensor *run_gelu_grad(workload *w) { return gc_unary_apply(GC_UNARY_GELU_ERF_GRAD, w->a); }
static gc_tensor *run_dropout(workload *w) { return gc_dropout(w->a, 0.1, 7, 0); }
static gc_tensor *run_dropout_bf16(workload *w) { return gc_dropout(w->a16, 0.1, 7, 0); }
static gc_tensor *run_cast(workload *w) { return gc_cast(w->a, GC_BF16); }
static gc_tensor *run_sum_all(workload *w) { return gc_sum_all(w->a); }
static gc_tensor *run_softmax(workload *w) { return gc_softmax(w->rows); }
static gc_tensor *run_layernorm(workload *w) { return gc_layernorm(w->rows, NULL, NULL, 1e-12, NULL, NULL); }

static gc_tensor *run_adamw(workload *w) {
    gc_adamw_hyper hyper = {.lr = 1e-7f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f,
                            .grad_scale = 1, .bias_correction1 = 0.1f, .bias_correction2 = 0.001f};
    /* a is the parameter (f32: no master copy), b the gradient: updated in place, as an
     * optimizer step does */
    gc_backend_for(w->device)->adamw_update(gc_data(w->a), NULL, gc_data(w->b), gc_data(w->m), gc_data(w->v),
                                            (size_t)w->n, GC_F32, &hyper);
    return NULL;
}

typedef struct kernel {
    const char *name;
    kernel_run run;
    double bytes_per_element; /* the fewest bytes it moves per element of n */
} kernel;

static const kernel kernels[] = {
    {"copy (clone)", run_copy, 8},             {"add", run_add, 12},
    {"mul_scalar", run_mul_scalar, 8},         {"gelu_erf", run_gelu, 8},
    {"gelu_erf derivative", run_gelu_grad, 8}, {"dropout", run_dropout, 8},
    {"dropout bf16", run_dropout_bf16, 4},     {"cast f32->bf16", run_cast, 6},
    {"adamw (in place)", run_adamw, 28},       {"sum_all", run_sum_all, 4},
    {"softmax [n/1024, 1024]", run_softmax, 8}, {"layernorm [n/1024, 1024]", run_layernorm, 8},
};

static double seconds_per_run(workload *w, kernel_run run) {
    gc_tensor_release(run(w)); /* warm-up: the allocator's cache, the first launch */
    gc_device_synchronize(w->device);
    double start = gc_seconds();
    for (int r = 0; r < w->reps; r++) gc_tensor_release(run(w));
    gc_device_synchronize(w->device);
    return (gc_seconds() - start) / w->reps;
}

int main(int argc, char **argv) {
    int64_t mib = 256;
    int reps = 20;
    gc_device device = gc_cpu();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = atoll(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && (!strcmp(argv[i + 1], "cpu") ||
                                                                    !strcmp(argv[i + 1], "cuda")))
            device = strcmp(argv[++i], "cuda") == 0 ? gc_cuda(0) : gc_cpu();
        else {
            printf("usage: %s [--device cpu|cuda] [--mib M] [--reps R]\n"
                   "Effective bandwidth of the memory-bound kernels against a device-to-device copy.\n"
                   "Defaults: cpu, operands of 256 MiB (f32), 20 runs per kernel after one warm-up.\n",
                   argv[0]);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    if (mib < 1 || reps < 1) {
        fprintf(stderr, "bench_bandwidth: --mib and --reps must be positive\n");
        return 2;
    }
    if (device.type == GC_DEVICE_CUDA && gc_cuda_device_count() < 1) {
        fprintf(stderr, "bench_bandwidth: no CUDA device\n");
        return 2;
    }
    workload w = {.device = device, .n = mib * (1 << 20) / 4, .reps = reps};
    w.n -= w.n % 1024;
    w.a = checked(gc_uniform(GC_SHAPE(w.n), GC_F32, device, -1, 1, 1, 0));
    w.b = checked(gc_uniform(GC_SHAPE(w.n), GC_F32, device, -1, 1, 2, 0));
    w.m = checked(gc_zeros(GC_SHAPE(w.n), GC_F32, device));
    w.v = checked(gc_zeros(GC_SHAPE(w.n), GC_F32, device));
    w.a16 = checked(gc_cast(w.a, GC_BF16));
    w.rows = checked(gc_reshape(w.a, GC_SHAPE(w.n / 1024, 1024)));

    char name[16];
    printf("bench_bandwidth: %s, %lld MiB operands (%lld f32 elements), %d runs each\n",
           gc_device_str(device, name, sizeof name), (long long)mib, (long long)w.n, reps);
    printf("  %-26s %10s %10s %12s\n", "kernel", "ms", "GB/s", "of copy");
    double copy_rate = 0;
    for (size_t k = 0; k < sizeof kernels / sizeof *kernels; k++) {
        double seconds = seconds_per_run(&w, kernels[k].run);
        double rate = kernels[k].bytes_per_element * (double)w.n / seconds / 1e9;
        if (k == 0) copy_rate = rate;
        printf("  %-26s %10.3f %10.1f %11.0f%%\n", kernels[k].name, 1e3 * seconds, rate, 100 * rate / copy_rate);
        fflush(stdout);
    }
    gc_tensor *all[] = {w.a, w.b, w.m, w.v, w.a16, w.rows};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) gc_tensor_release(all[i]);
    return 0;
}
