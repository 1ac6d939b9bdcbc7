/* Matmul throughput: the CPU kernel in GFLOP/s on encoder-sized products, and, when a
 * CUDA device is present, cuBLAS in TFLOP/s and as a fraction of the device's peak
 * measured in the same run (the best of a square 8192^3 product in each dtype).
 *
 * Each shape is the forward product of a linear layer y = x @ W (x [M, K], W [K, N])
 * and the two backward ones (dx = dy @ W^T, dW = x^T @ dy), each timed after one
 * warm-up call as the median of --reps runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"
#ifdef GC_HAVE_CUDA
#include "tensor/cuda/check.h"
#endif

typedef struct product {
    int64_t m, k, n;
    bool trans_a, trans_b;
    const char *name;
} product;

typedef struct timing {
    double median, best; /* seconds per product */
} timing;

/* [M, K, N] of linear layers: BERT-mini/small/base-sized, B*T = 512 to 4096 tokens. */
static const int64_t encoder_layers[][3] = {
    {2048, 256, 1024}, {2048, 1024, 256}, {512, 768, 768}, {4096, 768, 3072}};
#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

/* The forward and the two backward products of the layer [M, K, N] into out[3]. */
static void layer_products(const int64_t *layer, product *out) {
    int64_t M = layer[0], K = layer[1], N = layer[2];
    out[0] = (product){M, K, N, false, false, "x @ W"};
    out[1] = (product){M, N, K, false, true, "dy @ W^T"};
    out[2] = (product){K, M, N, true, false, "x^T @ dy"};
}

static gc_tensor *checked(gc_tensor *t) {
    if (!t) {
        fprintf(stderr, "bench_matmul: %s\n", gc_last_error());
        exit(1);
    }
    return t;
}

/* A [rows, cols] operand of values uniform in [-1, 1), drawn on its device (random data,
 * since a GPU's clock under load depends on how many bits flip). */
static gc_tensor *random_operand(int64_t rows, int64_t cols, gc_dtype dtype, gc_device device) {
    static uint64_t seed;
    return checked(gc_uniform(GC_SHAPE(rows, cols), dtype, device, -1, 1, ++seed, 0));
}

/* Seconds per product over `calls` back-to-back products: wall-clock time on the CPU,
 * CUDA events on a GPU (a burst, so that the host's work overlaps the device's). */
static double time_calls(const gc_tensor *a, const gc_tensor *b, const product *p, int calls) {
#ifdef GC_HAVE_CUDA
    if (a->device.type == GC_DEVICE_CUDA) {
        cudaEvent_t start, stop;
        GC_CUDA_CHECK(cudaEventCreate(&start));
        GC_CUDA_CHECK(cudaEventCreate(&stop));
        GC_CUDA_CHECK(cudaEventRecord(start, 0));
        for (int i = 0; i < calls; i++) gc_tensor_release(checked(gc_matmul(a, b, p->trans_a, p->trans_b)));
        GC_CUDA_CHECK(cudaEventRecord(stop, 0));
        GC_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        GC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        GC_CUDA_CHECK(cudaEventDestroy(start));
        GC_CUDA_CHECK(cudaEventDestroy(stop));
        return 1e-3 * ms / calls;
    }
#endif
    double start = bench_now();
    for (int i = 0; i < calls; i++) gc_tensor_release(checked(gc_matmul(a, b, p->trans_a, p->trans_b)));
    return (bench_now() - start) / calls;
}

static timing time_product(const product *p, gc_dtype dtype, gc_device device, int reps) {
    gc_tensor *a = random_operand(p->trans_a ? p->k : p->m, p->trans_a ? p->m : p->k, dtype, device);
    gc_tensor *b = random_operand(p->trans_b ? p->n : p->k, p->trans_b ? p->k : p->n, dtype, device);
    int calls = device.type == GC_DEVICE_CUDA ? 10 : 1;
    double *seconds = malloc(sizeof(double) * (size_t)reps);
    if (!seconds) gc_fatal("bench_matmul: no host memory");
    time_calls(a, b, p, 1); /* warm-up: caches, cuBLAS's handle and heuristics */
    for (int r = 0; r < reps; r++) seconds[r] = time_calls(a, b, p, calls);
    double median = bench_median(seconds, reps); /* sorts: seconds[0] is then the best */
    timing t = {median, seconds[0]};
    free(seconds);
    gc_tensor_release(a);
    gc_tensor_release(b);
    return t;
}

static double flops(const product *p) { return 2.0 * (double)p->m * (double)p->k * (double)p->n; }

static void bench_cpu(int reps) {
    const char *threads = getenv("GC_NUM_THREADS");
    printf("CPU f32, %s of %ld online CPUs as threads, median of %d\n", threads ? threads : "all",
           sysconf(_SC_NPROCESSORS_ONLN), reps);
    printf("%7s %7s %7s  %-9s %10s %9s\n", "m", "k", "n", "product", "ms", "GFLOP/s");
    for (int l = 0; l < COUNT(encoder_layers); l++) {
        product products[3];
        layer_products(encoder_layers[l], products);
        for (int i = 0; i < 3; i++) {
            const product *p = &products[i];
            timing t = time_product(p, GC_F32, gc_cpu(), reps);
            printf("%7lld %7lld %7lld  %-9s %10.3f %9.1f\n", (long long)p->m, (long long)p->k,
                   (long long)p->n, p->name, 1e3 * t.median, flops(p) / t.median * 1e-9);
        }
    }
}

#ifdef GC_HAVE_CUDA
static void bench_cuda(int reps) {
    /* Larger batches too, where a GPU reaches its stride. */
    static const int64_t large_layers[][3] = {{16384, 768, 3072}, {16384, 3072, 768}, {32768, 1024, 4096}};
    const gc_dtype dtypes[] = {GC_F32, GC_F16, GC_BF16};
    const product square = {8192, 8192, 8192, false, false, "8192^3"};
    struct cudaDeviceProp properties;
    GC_CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
    double peak[3];
    printf("\nCUDA %s: peak measured as the best of %d products of %s\n", properties.name, reps, square.name);
    for (int d = 0; d < 3; d++) {
        peak[d] = flops(&square) / time_product(&square, dtypes[d], gc_cuda(0), reps).best * 1e-12;
        printf("  %-4s %7.1f TFLOP/s\n", gc_dtype_name(dtypes[d]), peak[d]);
    }
    printf("%7s %7s %7s  %-9s %16s %16s %16s\n", "m", "k", "n", "product", "f32 TFLOP/s", "f16 TFLOP/s",
           "bf16 TFLOP/s");
    for (int l = 0; l < COUNT(encoder_layers) + COUNT(large_layers); l++) {
        product products[3];
        layer_products(l < COUNT(encoder_layers) ? encoder_layers[l]
                                                 : large_layers[l - COUNT(encoder_layers)],
                       products);
        for (int i = 0; i < 3; i++) {
            const product *p = &products[i];
            printf("%7lld %7lld %7lld  %-9s", (long long)p->m, (long long)p->k, (long long)p->n, p->name);
            for (int d = 0; d < 3; d++) {
                double tflops = flops(p) / time_product(p, dtypes[d], gc_cuda(0), reps).median * 1e-12;
                printf(" %7.1f (%4.0f%%)", tflops, 100 * tflops / peak[d]);
            }
            printf("\n");
        }
    }
}
#endif

static void usage(FILE *out) {
    fprintf(out, "usage: bench_matmul [--cpu-only | --cuda-only] [--reps N]\n"
                 "  --cpu-only   skip the CUDA part even when a GPU is present\n"
                 "  --cuda-only  skip the CPU part (on a GPU machine, where only the GPU's figures matter)\n"
                 "  --reps N     timed runs per shape, after one warm-up (default 5)\n"
                 "GC_NUM_THREADS sets the CPU kernel's threads.\n");
}

int main(int argc, char **argv) {
    bool cpu_only = false, cuda_only = false;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--cpu-only")) {
            cpu_only = true;
        } else if (!strcmp(argv[i], "--cuda-only")) {
            cuda_only = true;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            reps = atoi(argv[++i]);
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (cpu_only && cuda_only) {
        usage(stderr);
        return 2;
    }
    if (cuda_only && gc_cuda_device_count() < 1) {
        fprintf(stderr, "bench_matmul: --cuda-only: no CUDA device\n");
        return 2;
    }
    if (!cuda_only) bench_cpu(reps);
#ifdef GC_HAVE_CUDA
    if (!cpu_only && gc_cuda_device_count() > 0) bench_cuda(reps);
#endif
    return 0;
}
