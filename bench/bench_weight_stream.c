/* One text's products on the CPU: a few rows of activations against weights that do not fit
 * in the caches, as an encoder streams its layers for one short text. Each weight is packed
 * the way the library keeps it (gc_cpu_pack_b, as tensor/packed.c does), and --weights of
 * them (47 MB by default, more than a 32 MiB L3) are multiplied in turn, so every product
 * reads its weight from memory. Side by side, in turn: the product, and a plain read of the
 * same packed bytes on the same threads (the memory's speed for them, the bound of a product
 * whose multiply would cost nothing). Prints per row count the median microseconds per
 * product, GFLOP/s, the weight's GB/s, and product time / read time.
 *
 *   bench_weight_stream [--k K] [--n N] [--weights W] [--reps R]
 * GC_NUM_THREADS sets the threads, the product's and the read's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/thread_pool.h"

/* Sums the floats of `count` so that the compiler keeps the loads. */
static float read_all(const float *values, size_t count) {
    float lanes[16] = {0};
    for (size_t i = 0; i + 16 <= count; i += 16)
        for (int l = 0; l < 16; l++) lanes[l] += values[i + l];
    float total = 0;
    for (int l = 0; l < 16; l++) total += lanes[l];
    return total;
}

/* One weight read by the pool's threads: part p sums floats [p * chunk, (p + 1) * chunk). */
typedef struct parallel_read {
    const float *values;
    size_t count, chunk; /* chunk: a multiple of 16 */
    float *partial;      /* [parts] */
} parallel_read;

static void read_parts(void *ctx, int64_t begin, int64_t end) {
    parallel_read *job = ctx;
    for (int64_t p = begin; p < end; p++) {
        size_t start = (size_t)p * job->chunk, left = job->count > start ? job->count - start : 0;
        job->partial[p] = read_all(job->values + start, left < job->chunk ? left : job->chunk);
    }
}

/* Sums `count` floats on gc_cpu_threads() threads (partial: room for that many sums). */
static float read_parallel(const float *values, size_t count, float *partial) {
    int parts = gc_cpu_threads();
    parallel_read job = {values, count, ((count + (size_t)parts - 1) / (size_t)parts + 15) / 16 * 16, partial};
    gc_parallel_for(parts, 1, read_parts, &job);
    float total = 0;
    for (int p = 0; p < parts; p++) total += partial[p];
    return total;
}

int main(int argc, char **argv) {
    int64_t k = 384, n = 1536;
    int weights = 20, reps = 15;
    for (int i = 1; i < argc; i++) {
        bool has_value = i + 1 < argc;
        if (has_value && !strcmp(argv[i], "--k")) k = atoll(argv[++i]);
        else if (has_value && !strcmp(argv[i], "--n")) n = atoll(argv[++i]);
        else if (has_value && !strcmp(argv[i], "--weights")) weights = atoi(argv[++i]);
        else if (has_value && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else {
            fprintf(!strcmp(argv[i], "--help") ? stdout : stderr,
                    "usage: %s [--k K (384)] [--n N (1536)] [--weights W (20)] [--reps R (15)]\n", argv[0]);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (k < 1 || n < 1 || weights < 1 || reps < 1) {
        fprintf(stderr, "bench_weight_stream: --k, --n, --weights and --reps must be positive\n");
        return 2;
    }
    const int64_t row_counts[] = {1, 6, 11, 24, 128};
    const int64_t most_rows = 128;
    float *a = malloc(sizeof(float) * (size_t)(most_rows * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(most_rows * n));
    void **packed = calloc((size_t)weights, sizeof *packed);
    double *product_s = malloc(sizeof(double) * (size_t)reps), *read_s = malloc(sizeof(double) * (size_t)reps);
    float *partial = malloc(sizeof(float) * (size_t)gc_cpu_threads());
    if (!a || !b || !c || !packed || !product_s || !read_s || !partial) gc_fatal("bench_weight_stream: no host memory");
    for (int64_t e = 0; e < most_rows * k; e++) a[e] = (float)((e * 7919) % 2001 - 1000) * 1e-3f;
    for (int64_t e = 0; e < k * n; e++) b[e] = (float)((e * 104729) % 2001 - 1000) * 1e-3f;
    /* x [m, k] @ W^T with W [n, k], as a linear layer multiplies */
    gc_matmul_args args = {.a = a, .b = b, .c = c, .dtype = GC_F32, .batch = 1, .m = 1, .n = n, .k = k,
                           .trans_b = true, .alpha = 1.0f, .b_is_weight = true};
    size_t bytes;
    gc_cpu_pack_b_bytes(&args, &bytes);
    for (int w = 0; w < weights; w++) {
        packed[w] = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!packed[w]) gc_fatal("bench_weight_stream: no host memory for weight %d", w);
        gc_cpu_pack_b(&args, packed[w]);
    }
    printf("CPU f32, %d threads, own kernel %s: x [m, %lld] @ W^T, W [%lld, %lld], %d packed weights (%.1f MB) in "
           "turn; median of %d, product and plain read in turn\n",
           gc_cpu_threads(), gc_cpu_isa_name(gc_cpu_isa_selected()), (long long)k, (long long)n, (long long)k,
           weights, weights * (double)bytes * 1e-6, reps);
    printf("%5s %12s %9s %11s %12s %10s\n", "m", "us/product", "GFLOP/s", "weight GB/s", "read GB/s", "product/read");
    volatile float sink = 0;
    for (size_t r = 0; r < sizeof row_counts / sizeof row_counts[0]; r++) {
        args.m = row_counts[r];
        for (int rep = -1; rep < reps; rep++) { /* rep -1: the warm-up */
            double start = gc_seconds();
            for (int w = 0; w < weights; w++) {
                args.packed_b = packed[w];
                gc_cpu_matmul(&args);
            }
            double product = (gc_seconds() - start) / weights;
            start = gc_seconds();
            for (int w = 0; w < weights; w++) sink += read_parallel(packed[w], bytes / sizeof(float), partial);
            double read = (gc_seconds() - start) / weights;
            if (rep >= 0) product_s[rep] = product, read_s[rep] = read;
        }
        double product = gc_median(product_s, reps), read = gc_median(read_s, reps);
        printf("%5lld %12.1f %9.1f %11.1f %12.1f %10.2f\n", (long long)args.m, product * 1e6,
               2.0 * (double)args.m * (double)k * (double)n / product * 1e-9, bytes / product * 1e-9,
               bytes / read * 1e-9, product / read);
    }
    (void)sink;
    for (int w = 0; w < weights; w++) free(packed[w]);
    free(packed);
    free(a);
    free(b);
    free(c);
    free(product_s);
    free(read_s);
    free(partial);
    return 0;
}
