/* Matmul throughput: the CPU kernel in GFLOP/s on encoder-sized products, side by side with
 * OpenBLAS called directly (with its own threads) when the build has the BLAS, and, when a
 * CUDA device is present, cuBLAS in TFLOP/s and as a fraction of the device's peak
 * measured in the same run (the best of a square 8192^3 product in each dtype).
 *
 * Each shape is the forward product of a linear layer y = x @ W (x [M, K], W [K, N])
 * and the two backward ones (dx = dy @ W^T, dW = x^T @ dy), each timed after one
 * warm-up call as the median of --reps runs; on the CPU the contenders take turns.
 *
 * After a call OpenBLAS's worker threads spin for about 2^28 cycles (a tenth of a second)
 * before they sleep: on a machine with as many cores as threads they would take a core from
 * whichever contender runs next, which then measures at about half its speed. The program
 * runs itself again with OPENBLAS_THREAD_TIMEOUT=4 (OpenBLAS reads it when it loads: its
 * workers then sleep at once) unless that is set already. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"
#include "tensor/cpu/kernels_cpu.h"
#ifdef GC_HAVE_BLAS
#include <cblas.h>
#endif
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

#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

/* The forward and the two backward products of the layer [M, K, N] into out[3]. */
static void layer_products(const int64_t *layer, product *out) {
    int64_t M = layer[0], K = layer[1], N = layer[2];
    out[0] = (product){M, K, N, false, false, "x @ W"};
    out[1] = (product){M, N, K, false, true, "dy @ W^T"};
    out[2] = (product){K, M, N, true, false, "x^T @ dy"};
}

static double flops(const product *p) { return 2.0 * (double)p->m * (double)p->k * (double)p->n; }

/* [M, K, N] of the trainer's presets at 4096 tokens (batch 128 x 32), and a cube. */
static const int64_t cpu_layers[][3] = {{4096, 64, 128}, {4096, 128, 128}, {4096, 128, 512}, {4096, 512, 128},
                                        {1024, 1024, 1024}};

/* The CPU contenders: the own GEMM, the library's matmul (the BLAS path when built with
 * it), and OpenBLAS called directly. */
enum { OWN, LIBRARY, OPENBLAS, CONTENDERS };

static void cpu_product(int contender, const product *p, const float *a, const float *b, float *c) {
    gc_matmul_args args = {.a = a, .b = b, .c = c, .dtype = GC_F32, .batch = 1, .m = p->m, .n = p->n, .k = p->k,
                           .trans_a = p->trans_a, .trans_b = p->trans_b, .alpha = 1.0f};
    switch (contender) {
    case OWN: gc_cpu_matmul_own(&args, gc_cpu_isa_selected()); break;
    case LIBRARY: gc_cpu_matmul(&args); break;
#ifdef GC_HAVE_BLAS
    case OPENBLAS:
#ifdef OPENBLAS_VERSION
        openblas_set_num_threads(gc_cpu_threads()); /* the library's path turns them off */
#endif
        cblas_sgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans, p->trans_b ? CblasTrans : CblasNoTrans,
                    (int)p->m, (int)p->n, (int)p->k, 1.0f, a, p->trans_a ? (int)p->m : (int)p->k, b,
                    p->trans_b ? (int)p->k : (int)p->n, 0.0f, c, (int)p->n);
#ifdef OPENBLAS_VERSION
        openblas_set_num_threads(1);
#endif
        break;
#endif
    }
}

static void bench_cpu(int reps) {
#ifdef GC_HAVE_BLAS
    int contenders = CONTENDERS;
    gc_cpu_matmul_blas(&(gc_matmul_args){.dtype = GC_F32}); /* the library's BLAS set-up, before the first timing */
#else
    int contenders = OWN + 1;
#endif
    printf("CPU f32, %d threads, own kernel: %s; median of %d, contenders in turn\n", gc_cpu_threads(),
           gc_cpu_isa_name(gc_cpu_isa_selected()), reps);
    printf("%6s %6s %6s  %-9s %9s", "m", "k", "n", "product", "own GF/s");
    if (contenders > 1) printf(" %10s %9s %8s %9s", "gc_matmul", "OpenBLAS", "own/OB", "gc_mm/OB");
    printf("\n");
    double *seconds = malloc(sizeof(double) * (size_t)(reps * CONTENDERS));
    if (!seconds) gc_fatal("bench_matmul: no host memory");
    for (int l = 0; l < COUNT(cpu_layers); l++) {
        product products[3];
        layer_products(cpu_layers[l], products);
        for (int i = 0; i < 3; i++) {
            const product *p = &products[i];
            float *a = malloc(sizeof(float) * (size_t)(p->m * p->k)), *b = malloc(sizeof(float) * (size_t)(p->k * p->n));
            float *c = malloc(sizeof(float) * (size_t)(p->m * p->n));
            if (!a || !b || !c) gc_fatal("bench_matmul: no host memory");
            for (int64_t e = 0; e < p->m * p->k; e++) a[e] = (float)((e * 7919) % 2001 - 1000) * 1e-3f;
            for (int64_t e = 0; e < p->k * p->n; e++) b[e] = (float)((e * 104729) % 2001 - 1000) * 1e-3f;
            for (int w = 0; w < contenders; w++) cpu_product(w, p, a, b, c); /* warm-up */
            for (int r = 0; r < reps; r++)
                for (int w = 0; w < contenders; w++) {
                    double start = gc_seconds();
                    cpu_product(w, p, a, b, c);
                    seconds[w * reps + r] = gc_seconds() - start;
                }
            double gflops[CONTENDERS];
            for (int w = 0; w < contenders; w++) gflops[w] = flops(p) / gc_median(seconds + w * reps, reps) * 1e-9;
            printf("%6lld %6lld %6lld  %-9s %9.1f", (long long)p->m, (long long)p->k, (long long)p->n, p->name,
                   gflops[OWN]);
            if (contenders > 1)
                printf(" %10.1f %9.1f %8.2f %9.2f", gflops[LIBRARY], gflops[OPENBLAS], gflops[OWN] / gflops[OPENBLAS],
                       gflops[LIBRARY] / gflops[OPENBLAS]);
            printf("\n");
            free(a);
            free(b);
            free(c);
        }
    }
    free(seconds);
}

#ifdef GC_HAVE_CUDA
/* [M, K, N] of linear layers: BERT-mini/small/base-sized, B*T = 512 to 4096 tokens. */
static const int64_t encoder_layers[][3] = {
    {2048, 256, 1024}, {2048, 1024, 256}, {512, 768, 768}, {4096, 768, 3072}};
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
    double start = gc_seconds();
    for (int i = 0; i < calls; i++) gc_tensor_release(checked(gc_matmul(a, b, p->trans_a, p->trans_b)));
    return (gc_seconds() - start) / calls;
}

static timing time_product(const product *p, gc_dtype dtype, gc_device device, int reps) {
    gc_tensor *a = random_operand(p->trans_a ? p->k : p->m, p->trans_a ? p->m : p->k, dtype, device);
    gc_tensor *b = random_operand(p->trans_b ? p->n : p->k, p->trans_b ? p->k : p->n, dtype, device);
    int calls = device.type == GC_DEVICE_CUDA ? 10 : 1;
    double *seconds = malloc(sizeof(double) * (size_t)reps);
    if (!seconds) gc_fatal("bench_matmul: no host memory");
    time_calls(a, b, p, 1); /* warm-up: caches, cuBLAS's handle and heuristics */
    for (int r = 0; r < reps; r++) seconds[r] = time_calls(a, b, p, calls);
    double median = gc_median(seconds, reps); /* sorts: seconds[0] is then the best */
    timing t = {median, seconds[0]};
    free(seconds);
    gc_tensor_release(a);
    gc_tensor_release(b);
    return t;
}

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
                 "GC_NUM_THREADS sets the CPU threads (OpenBLAS gets as many), GC_CPU_KERNELS the own kernel's\n"
                 "instruction set (portable, avx2, avx512), GC_BLAS=0 the library's path to the own kernel.\n"
                 "OPENBLAS_THREAD_TIMEOUT is set to 4 (OpenBLAS's workers sleep right after a call) unless given.\n");
}

/* Runs the program again with OPENBLAS_THREAD_TIMEOUT=4 when it is not set (see the top);
 * returns only when that is not needed or the new run cannot start. */
static void rerun_with_sleeping_blas_workers(char **argv) {
#ifdef OPENBLAS_VERSION
    if (getenv("OPENBLAS_THREAD_TIMEOUT")) return;
    if (setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) != 0) return;
    execv("/proc/self/exe", argv);
    perror("bench_matmul: running again with OPENBLAS_THREAD_TIMEOUT=4");
#else
    (void)argv;
#endif
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
    if (!cuda_only) rerun_with_sleeping_blas_workers(argv);
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
