/* Matrix multiply on the CPU: a cache-blocked GEMM in the GotoBLAS/BLIS style.
 *
 * c [m, n] = alpha * op(a) [m, k] @ op(b) [k, n] + beta * c, for each batch.
 *
 * The loops cut op(b) into blocks of KC x NC (3 MiB of f32, kept in L3) and op(a) into
 * blocks of MC x KC (96 KiB, kept in L2). Each block is first packed into a contiguous buffer of thin
 * panels: MR rows of op(a), or NR columns of op(b), stored depth-major. Packing reads
 * the operands through a (row stride, column stride) pair, so the transpose flags cost
 * nothing after it, and pads partial panels with zeros, so the micro-kernel always
 * computes a full MR x NR tile from two unit-stride streams and only its store is
 * clipped to the edge of c. The micro-kernel accumulates the tile in a local array
 * whose loops are fully unrolled, so that gcc keeps it in vector registers and
 * vectorises it at plain -O2 (SSE2 only, no -march): 4 x 16 f32 (and 4 x 8 f64, the
 * same bytes) measured fastest, about 25 GFLOP/s per core on a Zen 3, although it
 * asks for all 16 SSE registers and gcc keeps a few accumulators on the stack.
 *
 * f32 and f64 share one definition (DEFINE_GEMM_TYPE below); f16 and bf16 are widened
 * to f32 scratch copies, multiplied in f32 and rounded once when stored.
 *
 * Rows of c are split between threads (GC_NUM_THREADS, default: the online CPUs). Each
 * element is summed in the same order whatever the split, so results do not depend
 * on the thread count. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "gradcache/error.h"
#include "kernels_cpu.h"

/* Block sizes in elements (the packing buffers round MC up to MR and NC up to NR). */
enum { KC = 256, MC = 96, NC = 3072 };

/* Below this many multiply-adds per thread, starting a thread costs more than it saves. */
#define MIN_WORK_PER_THREAD ((int64_t)1 << 20)
#define MAX_THREADS 64

/* The element type behind the type-independent loops of gemm_rows(). */
typedef struct gemm_type {
    size_t size; /* bytes per element */
    int mr, nr;  /* the micro-tile */
    /* Packs `width` lanes (rows of op(a), or columns of op(b)) of `depth` elements,
     * where lane l, depth p is src[l * lane_stride + p * depth_stride], into panels of
     * `lanes` lanes: dst[panel][p][lane], zero-padded to a whole panel. */
    void (*pack)(void *dst, const void *src, int64_t lane_stride, int64_t depth_stride, int64_t width,
                 int64_t depth, int lanes);
    /* c [rows, cols] (row stride ldc, at most mr x nr) = alpha * pa @ pb + beta * c,
     * from a packed panel of op(a) and one of op(b), each `depth` deep. Does not read
     * c when beta is 0. */
    void (*tile)(const void *pa, const void *pb, int64_t depth, void *c, int64_t ldc, int64_t rows,
                 int64_t cols, float alpha, float beta);
} gemm_type;

#define DEFINE_GEMM_TYPE(T, NAME, MR, NR)                                                                    \
    static void pack_##NAME(void *dst, const void *src, int64_t lane_stride, int64_t depth_stride,           \
                            int64_t width, int64_t depth, int lanes) {                                       \
        T *out = dst;                                                                                        \
        const T *in = src;                                                                                   \
        for (int64_t first = 0; first < width; first += lanes)                                               \
            for (int64_t p = 0; p < depth; p++)                                                              \
                for (int64_t l = first; l < first + lanes; l++)                                              \
                    *out++ = l < width ? in[l * lane_stride + p * depth_stride] : (T)0;                      \
    }                                                                                                        \
                                                                                                             \
    static void tile_##NAME(const void *pa, const void *pb, int64_t depth, void *c, int64_t ldc,             \
                            int64_t rows, int64_t cols, float alpha, float beta) {                           \
        const T *a = pa, *b = pb;                                                                            \
        T acc[MR][NR] = {{0}};                                                                               \
        for (int64_t p = 0; p < depth; p++, a += MR, b += NR) {                                              \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                            \
                _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];              \
        }                                                                                                    \
        T *out = c;                                                                                          \
        for (int64_t i = 0; i < rows; i++)                                                                   \
            for (int64_t j = 0; j < cols; j++) {                                                             \
                T *dst = &out[i * ldc + j];                                                                  \
                *dst = (T)alpha * acc[i][j] + (beta == 0 ? (T)0 : (T)beta * *dst);                           \
            }                                                                                                \
    }                                                                                                        \
                                                                                                             \
    static const gemm_type gemm_##NAME = {sizeof(T), MR, NR, pack_##NAME, tile_##NAME};

DEFINE_GEMM_TYPE(float, f32, 4, 16)
DEFINE_GEMM_TYPE(double, f64, 4, 8)

static const void *element(const void *base, int64_t index, size_t size) {
    return (const char *)base + (size_t)index * size;
}

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

static int64_t round_up(int64_t x, int64_t step) { return (x + step - 1) / step * step; }

static void *scratch(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) gc_fatal("matmul: out of host memory for %zu bytes of scratch", bytes);
    return p;
}

/* The job of one thread: rows [row_begin, row_end) of every batch of c. */
typedef struct gemm_job {
    const gc_matmul_args *args;
    const gemm_type *type;
    int64_t row_begin, row_end;
} gemm_job;

/* The job's rows of one matrix: c [m, n] (+)= op(a) [m, k] @ op(b) [k, n], through the
 * packing buffers packed_a [MC, KC] and packed_b [KC, NC] (rounded up to whole panels). */
static void gemm_matrix(const gemm_job *job, const void *a, const void *b, char *c, void *packed_a,
                        void *packed_b) {
    const gc_matmul_args *g = job->args;
    const gemm_type *t = job->type;
    int64_t m = g->m, n = g->n, k = g->k;
    /* op(a)[i][p] = a[i * a_rs + p * a_cs] and op(b)[p][j] = b[p * b_rs + j * b_cs]. */
    int64_t a_rs = g->trans_a ? 1 : k, a_cs = g->trans_a ? m : 1;
    int64_t b_rs = g->trans_b ? 1 : n, b_cs = g->trans_b ? k : 1;
    for (int64_t jc = 0; jc < n; jc += NC) {
        int64_t nc = min64(NC, n - jc);
        /* At least one pass even when k = 0, so that c still becomes beta * c. */
        for (int64_t pc = 0; pc < k || pc == 0; pc += KC) {
            int64_t kc = min64(KC, k - pc);
            /* The first pass over k applies beta; the later ones accumulate. */
            float beta = pc == 0 ? g->beta : 1.0f;
            t->pack(packed_b, element(b, pc * b_rs + jc * b_cs, t->size), b_cs, b_rs, nc, kc, t->nr);
            for (int64_t ic = job->row_begin; ic < job->row_end; ic += MC) {
                int64_t mc = min64(MC, job->row_end - ic);
                t->pack(packed_a, element(a, ic * a_rs + pc * a_cs, t->size), a_rs, a_cs, mc, kc, t->mr);
                /* One panel of b stays in L1 while every panel of a streams past it. */
                for (int64_t jr = 0; jr < nc; jr += t->nr)
                    for (int64_t ir = 0; ir < mc; ir += t->mr)
                        t->tile(element(packed_a, ir * kc, t->size), element(packed_b, jr * kc, t->size), kc,
                                c + (size_t)((ic + ir) * n + jc + jr) * t->size, n, min64(t->mr, mc - ir),
                                min64(t->nr, nc - jr), g->alpha, beta);
            }
        }
    }
}

static void *gemm_rows(void *arg) {
    const gemm_job *job = arg;
    const gc_matmul_args *g = job->args;
    size_t size = job->type->size;
    /* Packing buffers sized to the problem, not the blocks: small products (autograd's,
     * a gradient check's) would otherwise allocate and touch megabytes per call. */
    int64_t depth = min64(KC, g->k > 0 ? g->k : 1);
    int64_t rows = min64(MC, job->row_end - job->row_begin), cols = min64(NC, g->n);
    void *packed_a = scratch((size_t)(round_up(rows, job->type->mr) * depth) * size);
    void *packed_b = scratch((size_t)(depth * round_up(cols, job->type->nr)) * size);
    for (int64_t batch = 0; batch < g->batch; batch++)
        gemm_matrix(job, element(g->a, batch * g->m * g->k, size), element(g->b, batch * g->k * g->n, size),
                    (char *)g->c + (size_t)(batch * g->m * g->n) * size, packed_a, packed_b);
    free(packed_a);
    free(packed_b);
    return NULL;
}

/* GC_NUM_THREADS, or the number of online CPUs. */
static int configured_threads(void) {
    const char *text = getenv("GC_NUM_THREADS");
    if (text && *text) {
        char *end;
        long value = strtol(text, &end, 10);
        if (*end || value < 1) gc_fatal("matmul: GC_NUM_THREADS=%s is not a positive integer", text);
        return value < MAX_THREADS ? (int)value : MAX_THREADS;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : online < MAX_THREADS ? (int)online : MAX_THREADS;
}

/* Splits the rows of c into one slice per thread, each a whole number of micro-tiles;
 * the calling thread takes the first slice. A thread that cannot be started leaves its
 * slice to the calling thread. */
static void gemm(const gc_matmul_args *args, const gemm_type *type) {
    int64_t tiles = (args->m + type->mr - 1) / type->mr;
    int64_t work = args->batch * args->m * args->n * args->k;
    int64_t threads = min64(min64(configured_threads(), tiles), work / MIN_WORK_PER_THREAD);
    if (threads < 1) threads = 1;

    gemm_job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int64_t i = 0; i < threads; i++) {
        jobs[i] = (gemm_job){args, type, min64(args->m, tiles * i / threads * type->mr),
                             min64(args->m, tiles * (i + 1) / threads * type->mr)};
        if (i > 0) started[i] = pthread_create(&ids[i], NULL, gemm_rows, &jobs[i]) == 0;
    }
    for (int64_t i = 0; i < threads; i++)
        if (!started[i]) gemm_rows(&jobs[i]);
    for (int64_t i = 1; i < threads; i++)
        if (started[i]) pthread_join(ids[i], NULL);
}

/* f16 and bf16: widened exactly to f32, multiplied in f32, rounded once into c. */
static void gemm_half(const gc_matmul_args *args) {
    size_t a_count = (size_t)(args->batch * args->m * args->k);
    size_t b_count = (size_t)(args->batch * args->k * args->n);
    size_t c_count = (size_t)(args->batch * args->m * args->n);
    float *a = scratch(a_count * sizeof(float));
    float *b = scratch(b_count * sizeof(float));
    float *c = scratch(c_count * sizeof(float));
    gc_cpu_cast(args->a, args->dtype, a, GC_F32, a_count);
    gc_cpu_cast(args->b, args->dtype, b, GC_F32, b_count);
    if (args->beta != 0) gc_cpu_cast(args->c, args->dtype, c, GC_F32, c_count);

    gc_matmul_args wide = *args;
    wide.a = a;
    wide.b = b;
    wide.c = c;
    wide.dtype = GC_F32;
    gemm(&wide, &gemm_f32);
    gc_cpu_cast(c, GC_F32, args->c, args->dtype, c_count);
    free(a);
    free(b);
    free(c);
}

void gc_cpu_matmul(const gc_matmul_args *args) {
    switch (args->dtype) {
    case GC_F32: gemm(args, &gemm_f32); break;
    case GC_F64: gemm(args, &gemm_f64); break;
    case GC_F16:
    case GC_BF16: gemm_half(args); break;
    default: gc_fatal("matmul: no CPU kernel for %s", gc_dtype_name(args->dtype));
    }
}
