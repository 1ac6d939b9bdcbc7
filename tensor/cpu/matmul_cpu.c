/* Matrix multiply on the CPU: a cache-blocked GEMM in the GotoBLAS/BLIS style, threaded.
 *
 * c [m, n] = alpha * op(a) [m, k] @ op(b) [k, n] + beta * c, for each batch.
 *
 * The loops cut op(b) into blocks of KC x NC (3 MiB of f32, kept in L3) and op(a) into
 * blocks of MC x KC (96 KiB, kept in L2). Each block is first packed into a contiguous
 * buffer of thin panels: mr rows of op(a), or nr columns of op(b), stored depth-major.
 * Packing reads the operands through a (row stride, column stride) pair, so the transpose
 * flags cost nothing after it, and pads partial panels with zeros, so the micro-kernel
 * always computes a full mr x nr tile from two unit-stride streams and only its store is
 * clipped to the edge of c. An op(a) whose depth is contiguous is not packed where the
 * micro-kernel can read its rows in place (tile_in_place): packing it was a gather. The
 * micro-kernels (gemm_kernel.h) are portable C or AVX2/AVX-512 code picked at run time
 * (cpu_isa.h).
 *
 * Threads (thread_pool.h): a single product packs op(b) once, whole along k (up to 16 MiB
 * of it at a time), the threads sharing the panels, then splits the rows of c between them,
 * each packing its own blocks of op(a): two parallel calls per product (a product of too few
 * rows to share out splits the panels of op(b) instead). A weight's op(b) may come packed
 * already (args->packed_b: gc_cpu_pack_b's panels, kept by tensor/packed.c), the same panels
 * laid out pass after pass, and then only the multiply runs. A batch of small products
 * (attention's, one per head) gives whole products to each thread instead. Every element is
 * summed in the same order whatever the split (the KC blocks in turn, each by one
 * micro-kernel call), so results do not depend on the thread count.
 *
 * f32 and f64 run natively; f16 and bf16 are widened to f32 scratch copies, multiplied in
 * f32 and rounded once when stored. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm_kernel.h"
#include "gradcache/error.h"
#include "kernels_cpu.h"
#include "scratch_cpu.h"
#include "thread_pool.h"

/* Block sizes in elements; MC is a multiple of every variant's mr (4 and 6). */
enum { KC = GC_GEMM_DEPTH_BLOCK, MC = 96, NC = 3072 };

/* Multiply-adds below which a thread is not worth waking. */
#define MIN_WORK_PER_PART ((int64_t)1 << 18)
/* Elements of op(b) below which one thread packs them alone. */
#define MIN_PACK_PER_PART ((int64_t)1 << 15)
/* Elements of op(b) packed at once, at most (16 MiB of f32). */
#define PACKED_B_MAX ((int64_t)1 << 22)

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }
static int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

/* One product's operands, seen through the strides that make the transposes free:
 * op(a)[i][p] = a[i * a_rs + p * a_cs] and op(b)[p][j] = b[p * b_rs + j * b_cs]. */
typedef struct gemm_plan {
    const gc_gemm_kernel *kernel;
    int64_t m, n, k;
    int64_t a_rs, a_cs, b_rs, b_cs;
    int64_t ldc; /* c's row stride: n, or a wider matrix's (gc_cpu_matmul_strided) */
    float alpha, beta;
    const char *c_row; /* NULL, or c's starting row for every row (gc_matmul_args) */
} gemm_plan;

/* One matrix of the batch, and the columns [jc, jc + nc) of op(b) being worked on: op(b)
 * packed whole along k, block after block of KC rows, so that the threads pack it in one
 * parallel call and multiply in another. */
typedef struct gemm_columns {
    const gemm_plan *plan;
    const char *a, *b;
    char *c;
    char *packed_b;   /* [ceil(k / KC)][KC, nc rounded up to whole panels] */
    int64_t jc, nc;
    int64_t panels;   /* per KC block: ceil(nc / nr) */
} gemm_columns;

static const char *at(const void *base, int64_t index, size_t size) {
    return (const char *)base + (size_t)index * size;
}

static int64_t blocks_along_k(int64_t k) { return k > 0 ? (k + KC - 1) / KC : 1; }

/* The packed panels of op(b) for depth [pc, pc + kc). */
static char *packed_b_block(const gemm_columns *cols, int64_t pc) {
    return cols->packed_b + (size_t)((pc / KC) * KC * cols->panels * cols->plan->kernel->nr) * cols->plan->kernel->size;
}

/* Packs the panels [first, last) of op(b), numbered block after block along k. */
static void pack_b_panels(void *arg, int64_t first, int64_t last) {
    const gemm_columns *cols = arg;
    const gemm_plan *plan = cols->plan;
    const gc_gemm_kernel *t = plan->kernel;
    for (int64_t panel = first; panel < last;) {
        int64_t block = panel / cols->panels, in_block = panel % cols->panels;
        int64_t count = min64(last - panel, cols->panels - in_block); /* panels of this block to pack */
        int64_t pc = block * KC, kc = min64(KC, plan->k - pc), col = in_block * t->nr;
        t->pack_b(packed_b_block(cols, pc) + (size_t)(col * kc) * t->size,
                  at(cols->b, pc * plan->b_rs + (cols->jc + col) * plan->b_cs, t->size), plan->b_cs, plan->b_rs,
                  min64(cols->nc - col, count * t->nr), kc);
        panel += count;
    }
}

/* Rows of op(a) from which the row tiles of a panel fetch the next panel of op(b) while they
 * multiply: with fewer, there is too little multiplying to hide the fetch behind (one row
 * alone only streams op(b), and runs at the memory's speed already); with 6 to 24 rows (one
 * text; AVX2 on a Zen 3), a weight's panels come from memory 10-25% faster than when each
 * row tile waits for them, and more rows take the same time either way. Every tile fetches,
 * not only the last: the lines then arrive at the pace the multiply uses them, where the
 * last tile alone would ask for a panel in the time of a few rows. */
#define MIN_ROWS_TO_FETCH_AHEAD 4

/* Whether a panel of `bytes` and the next one fit in L1 together: the next is fetched only
 * then. Where they do not (AVX-512's panels of 32 f32 lanes, 32 KiB at depth 256, in a 32 KiB
 * L1), fetching the next one evicts lines of the current panel before the multiply reaches
 * them: one text with all-MiniLM-L6-v2 on a Zen 4 took 4.4 ms with the fetch and 3.4 ms
 * without on one thread, 2.6 and 2.0 ms on two; with AVX2's 16 KiB panels on the same
 * machine, 4.0 ms with it and 5.1-5.6 ms without. */
static bool panels_fit_in_l1(size_t bytes) {
    static atomic_long l1_bytes; /* 0 until read */
    long l1 = atomic_load_explicit(&l1_bytes, memory_order_relaxed);
    if (!l1) {
#ifdef _SC_LEVEL1_DCACHE_SIZE /* glibc's */
        l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
#endif
        if (l1 <= 0) l1 = 32 << 10; /* unknown: the commonest L1 of x86-64 cores */
        atomic_store_explicit(&l1_bytes, l1, memory_order_relaxed);
    }
    return 2 * bytes <= (size_t)l1;
}

/* The panel of op(b) after `panel` of the KC block at depth pc, for the panels [begin, end)
 * of the columns (the next block's first one after the last, when it is as deep: the fetch
 * walks as many lines as the current panel has), or NULL. */
static const char *panel_after(const gemm_columns *cols, int64_t pc, int64_t panel, int64_t begin, int64_t end) {
    const gc_gemm_kernel *t = cols->plan->kernel;
    int64_t kc = min64(KC, cols->plan->k - pc);
    if (panel + 1 < end) return packed_b_block(cols, pc) + (size_t)((panel + 1) * t->nr * kc) * t->size;
    if (pc + KC >= cols->plan->k || cols->plan->k - pc - KC < kc) return NULL;
    return packed_b_block(cols, pc + KC) + (size_t)(begin * t->nr * kc) * t->size;
}

/* Rows [row_begin, row_end) of c for the panels [panel_begin, panel_end) of the columns: for
 * each KC block of op(b) in turn, op(a) MC rows at a time against it, packed, or read where
 * it lies when its depth is contiguous and the kernel can (tile_in_place). */
static void multiply_block(const gemm_columns *cols, int64_t row_begin, int64_t row_end, int64_t panel_begin,
                           int64_t panel_end) {
    const gemm_plan *plan = cols->plan;
    const gc_gemm_kernel *t = plan->kernel;
    size_t size = t->size;
    bool in_place = t->tile_in_place && plan->a_cs == 1;
    char *packed_a =
        in_place ? NULL : gc_cpu_scratch(GC_SCRATCH_PACK_A, (size_t)(MC * min64(KC, max64(plan->k, 1))) * size);
    /* At least one pass even when k = 0, so that c still becomes beta * c. */
    for (int64_t pc = 0; pc < plan->k || pc == 0; pc += KC) {
        int64_t kc = min64(KC, plan->k - pc);
        float beta = pc == 0 ? plan->beta : 1.0f; /* the later blocks accumulate */
        const char *packed_b = packed_b_block(cols, pc);
        for (int64_t ic = row_begin; ic < row_end; ic += MC) {
            int64_t mc = min64(MC, row_end - ic);
            const char *a_block = at(cols->a, ic * plan->a_rs + pc * plan->a_cs, size);
            if (!in_place) t->pack_a(packed_a, a_block, plan->a_rs, plan->a_cs, mc, kc);
            /* One panel of b stays in L1 while every panel of a streams past it, and the next
             * panel is fetched meanwhile where both fit. */
            int64_t panel_last = min64(cols->panels, panel_end);
            bool fetch_ahead = mc >= MIN_ROWS_TO_FETCH_AHEAD && panels_fit_in_l1((size_t)(t->nr * kc) * size);
            for (int64_t panel = panel_begin; panel < panel_last; panel++) {
                int64_t jr = panel * t->nr;
                const char *b_panel = packed_b + (size_t)(jr * kc) * size;
                const char *after = fetch_ahead ? panel_after(cols, pc, panel, panel_begin, panel_last) : NULL;
                const char *next = after ? after : b_panel;
                char *c = cols->c + (size_t)(ic * plan->ldc + cols->jc + jr) * size;
                gc_gemm_tile_out out = {c, plan->ldc, c, plan->ldc, mc, min64(t->nr, cols->nc - jr), plan->alpha, beta};
                if (pc == 0 && plan->c_row) { /* the first block starts from the row */
                    out.c_in = plan->c_row + (size_t)(cols->jc + jr) * size;
                    out.ldc_in = 0;
                }
                if (in_place) t->tile_in_place(a_block, plan->a_rs, b_panel, next, kc, &out);
                else t->tile(packed_a, b_panel, next, kc, &out);
            }
        }
    }
}

/* The row tiles [first, last) (mr rows each), every panel. */
static void multiply_tiles(void *arg, int64_t first, int64_t last) {
    const gemm_columns *cols = arg;
    int64_t mr = cols->plan->kernel->mr;
    multiply_block(cols, first * mr, min64(cols->plan->m, last * mr), 0, cols->panels);
}

/* The panels [first, last) (nr columns each), every row: how a product of a few rows (one
 * text, a dozen tokens) keeps every thread busy. Each thread packs all of op(a) (or reads it
 * in place), which is small then. */
static void multiply_panels(void *arg, int64_t first, int64_t last) {
    const gemm_columns *cols = arg;
    multiply_block(cols, 0, cols->plan->m, first, last);
}

/* Columns per pass over op(b): NC, or fewer so that op(b) packed whole along k stays within
 * PACKED_B_MAX elements. A multiple of nr. */
static int64_t pass_width(const gemm_plan *plan) {
    int64_t nr = plan->kernel->nr;
    return min64(NC, max64(nr, PACKED_B_MAX / (blocks_along_k(plan->k) * KC) / nr * nr));
}

/* The columns [jc, jc + nc) of op(b) and where their panels are (or go): block after block
 * of KC rows, each ceil(nc / nr) panels wide. */
static gemm_columns columns_at(const gemm_plan *plan, const char *a, const char *b, char *c, char *packed_b,
                               int64_t jc) {
    int64_t nc = min64(pass_width(plan), plan->n - jc);
    return (gemm_columns){plan, a, b, c, packed_b, jc, nc, (nc + plan->kernel->nr - 1) / plan->kernel->nr};
}

/* Packs the pass's op(b), threaded when `threaded`. */
static void pack_pass(gemm_columns *cols, bool threaded) {
    const gc_gemm_kernel *t = cols->plan->kernel;
    int64_t panels = blocks_along_k(cols->plan->k) * cols->panels;
    if (!threaded) {
        pack_b_panels(cols, 0, panels);
        return;
    }
    int64_t depth = min64(KC, max64(cols->plan->k, 1));
    gc_parallel_for(panels, max64(1, MIN_PACK_PER_PART / (depth * t->nr)), pack_b_panels, cols);
}

/* Elements of one pass's panels when kept whole: k rows of whole panels (the blocks along k
 * follow each other with no gap; the last one is k - pc rows). */
static size_t pass_elements(const gemm_columns *cols) {
    return (size_t)(cols->plan->k * cols->panels * cols->plan->kernel->nr);
}

/* One matrix: c = op(a) @ op(b), threaded when `threaded`. op(b) is packed per pass into the
 * calling thread's scratch, shared with the workers, or comes packed whole (`packed`, pass
 * after pass: gc_cpu_pack_b's layout). */
static void gemm_matrix(const gemm_plan *plan, const char *a, const char *b, char *c, bool threaded,
                        const char *packed) {
    const gc_gemm_kernel *t = plan->kernel;
    int64_t m = plan->m, n = plan->n, k_blocks = blocks_along_k(plan->k);
    int64_t most_panels = (min64(pass_width(plan), n) + t->nr - 1) / t->nr;
    char *scratch = packed ? NULL
                           : gc_cpu_scratch(GC_SCRATCH_PACK_B, (size_t)(k_blocks * KC * most_panels * t->nr) * t->size);
    for (int64_t jc = 0; jc < n;) {
        gemm_columns cols = columns_at(plan, a, b, c, packed ? (char *)packed : scratch, jc);
        if (packed) packed += pass_elements(&cols) * t->size;
        else pack_pass(&cols, threaded);
        int64_t tiles = (m + t->mr - 1) / t->mr;
        if (!threaded) multiply_tiles(&cols, 0, tiles);
        else if (tiles < 4 * gc_cpu_threads()) /* too few row tiles to share out evenly */
            gc_parallel_for(cols.panels, max64(1, MIN_WORK_PER_PART / (m * t->nr * max64(plan->k, 1))),
                            multiply_panels, &cols);
        else
            gc_parallel_for(tiles, max64(1, MIN_WORK_PER_PART / (t->mr * cols.nc * max64(plan->k, 1))),
                            multiply_tiles, &cols);
        jc += cols.nc;
    }
}

/* The batch: a, b and c of matrix i are i m k, i k n and i m n elements in. */
typedef struct gemm_batch {
    const gemm_plan *plan;
    const gc_matmul_args *args;
} gemm_batch;

static void gemm_matrices(void *arg, int64_t first, int64_t last) {
    const gemm_batch *batch = arg;
    const gc_matmul_args *g = batch->args;
    size_t size = batch->plan->kernel->size;
    for (int64_t i = first; i < last; i++)
        gemm_matrix(batch->plan, at(g->a, i * g->m * g->k, size), at(g->b, i * g->k * g->n, size),
                    (char *)g->c + (size_t)(i * g->m * g->n) * size, false, NULL);
}

/* The plan for a, b and c stored with the row strides lda, ldb and ldc (a is [m, k], or [k, m]
 * when transposed; b likewise). */
static gemm_plan strided_plan(const gc_matmul_args *args, const gc_gemm_kernel *kernel, int64_t lda, int64_t ldb,
                              int64_t ldc) {
    return (gemm_plan){kernel, args->m, args->n, args->k, args->trans_a ? 1 : lda, args->trans_a ? lda : 1,
                       args->trans_b ? 1 : ldb, args->trans_b ? ldb : 1, ldc, args->alpha, args->beta, args->c_row};
}

/* The plan for contiguous a, b and c. */
static gemm_plan plan_for(const gc_matmul_args *args, const gc_gemm_kernel *kernel) {
    return strided_plan(args, kernel, args->trans_a ? args->m : args->k, args->trans_b ? args->k : args->n, args->n);
}

static void gemm(const gc_matmul_args *args, const gc_gemm_kernel *kernel) {
    if (args->batch == 0 || args->m == 0 || args->n == 0) return;
    int64_t m = args->m, n = args->n, k = args->k;
    gemm_plan plan = plan_for(args, kernel);
    int64_t work = m * n * max64(k, 1);
    gemm_batch batch = {&plan, args};
    /* Many small products: whole products per thread. Otherwise each one threaded. */
    if (args->batch > 1 && (args->batch >= 2 * gc_cpu_threads() || work < 4 * MIN_WORK_PER_PART)) {
        gc_parallel_for(args->batch, max64(1, MIN_WORK_PER_PART / work), gemm_matrices, &batch);
        return;
    }
    for (int64_t i = 0; i < args->batch; i++) {
        size_t size = kernel->size;
        gemm_matrix(&plan, at(args->a, i * m * k, size), at(args->b, i * k * n, size),
                    (char *)args->c + (size_t)(i * m * n) * size, work >= 2 * MIN_WORK_PER_PART, args->packed_b);
    }
}

/* A weight's panels are the selected instruction set's, f32 and f64 (16-bit products widen
 * op(b) per call), for one product (a batch has one op(b) per matrix: never a weight's). */
static const gc_gemm_kernel *packing_kernel(const gc_matmul_args *args) {
    bool packs = (args->dtype == GC_F32 || args->dtype == GC_F64) && args->batch == 1 && args->k > 0 && args->n > 0;
    return packs ? gc_gemm_kernel_for(args->dtype, gc_cpu_isa_selected()) : NULL;
}

void gc_cpu_pack_b_bytes(const gc_matmul_args *args, size_t *bytes) {
    const gc_gemm_kernel *kernel = packing_kernel(args);
    *bytes = 0;
    if (!kernel) return;
    gemm_plan plan = plan_for(args, kernel);
    for (int64_t jc = 0; jc < args->n;) {
        gemm_columns cols = columns_at(&plan, NULL, NULL, NULL, NULL, jc);
        *bytes += pass_elements(&cols) * kernel->size;
        jc += cols.nc;
    }
}

void gc_cpu_pack_b(const gc_matmul_args *args, void *packed) {
    const gc_gemm_kernel *kernel = packing_kernel(args);
    if (!kernel) gc_fatal("pack_b: no packed form of a %s product of batch %lld", gc_dtype_name(args->dtype),
                          (long long)args->batch);
    gemm_plan plan = plan_for(args, kernel);
    char *at_pass = packed;
    for (int64_t jc = 0; jc < args->n;) {
        gemm_columns cols = columns_at(&plan, NULL, args->b, NULL, at_pass, jc);
        pack_pass(&cols, true);
        at_pass += pass_elements(&cols) * kernel->size;
        jc += cols.nc;
    }
}

static void *host_buffer(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) gc_fatal("matmul: out of host memory for %zu bytes of scratch", bytes);
    return p;
}

static void product(const gc_matmul_args *args, gc_cpu_isa isa, bool use_blas);

/* f16 and bf16: widened exactly to f32, multiplied in f32 (as an f32 product would be, BLAS
 * included), rounded once into c. */
static void gemm_half(const gc_matmul_args *args, gc_cpu_isa isa, bool use_blas) {
    size_t a_count = (size_t)(args->batch * args->m * args->k);
    size_t b_count = (size_t)(args->batch * args->k * args->n);
    size_t c_count = (size_t)(args->batch * args->m * args->n);
    float *a = host_buffer(a_count * sizeof(float));
    float *b = host_buffer(b_count * sizeof(float));
    float *c = host_buffer(c_count * sizeof(float));
    gc_cpu_cast(args->a, args->dtype, a, GC_F32, a_count);
    gc_cpu_cast(args->b, args->dtype, b, GC_F32, b_count);
    if (args->beta != 0) gc_cpu_cast(args->c, args->dtype, c, GC_F32, c_count);

    gc_matmul_args wide = *args;
    wide.a = a;
    wide.b = b;
    wide.c = c;
    wide.dtype = GC_F32;
    wide.packed_b = NULL; /* a 16-bit op(b) is never kept packed: it is widened here */
    product(&wide, isa, use_blas);
    gc_cpu_cast(c, GC_F32, args->c, args->dtype, c_count);
    free(a);
    free(b);
    free(c);
}

/* The product with c_row (gc_matmul_args) copied into every row of c first, for the paths
 * that read c itself (the BLAS, the 16-bit widening). */
static gc_matmul_args row_copied_into_c(const gc_matmul_args *args) {
    gc_matmul_args copied = *args;
    size_t row_bytes = (size_t)args->n * gc_dtype_size(args->dtype);
    for (int64_t row = 0; row < args->batch * args->m; row++)
        memcpy((char *)args->c + (size_t)row * row_bytes, args->c_row, row_bytes);
    copied.c_row = NULL;
    return copied;
}

static void product(const gc_matmul_args *args, gc_cpu_isa isa, bool use_blas) {
    bool wide = args->dtype == GC_F32 || args->dtype == GC_F64;
#ifdef GC_HAVE_BLAS
    bool blas = wide && use_blas && !args->b_is_weight;
#else
    bool blas = false;
#endif
    if (args->c_row && (blas || !wide)) { /* only the own f32/f64 GEMM reads the row itself */
        gc_matmul_args copied = row_copied_into_c(args);
        product(&copied, isa, use_blas);
        return;
    }
    switch (args->dtype) {
    case GC_F32:
    case GC_F64:
#ifdef GC_HAVE_BLAS
        if (blas) {
            gc_cpu_matmul_blas(args);
            break;
        }
#endif
        gemm(args, gc_gemm_kernel_for(args->dtype, isa));
        break;
    case GC_F16:
    case GC_BF16: gemm_half(args, isa, use_blas); break;
    default: gc_fatal("matmul: no CPU kernel for %s", gc_dtype_name(args->dtype));
    }
}

void gc_cpu_matmul_own(const gc_matmul_args *args, gc_cpu_isa isa) { product(args, isa, false); }

void gc_cpu_matmul_strided(const gc_matmul_args *args, int64_t lda, int64_t ldb, int64_t ldc, gc_cpu_isa isa) {
    bool wide = args->dtype == GC_F32 || args->dtype == GC_F64;
    if (!wide || args->batch != 1 || args->c_row || args->packed_b)
        gc_fatal("matmul_strided: %s product of batch %lld%s%s: only one f32 or f64 product of plain operands",
                 gc_dtype_name(args->dtype), (long long)args->batch, args->c_row ? ", a bias row" : "",
                 args->packed_b ? ", packed" : "");
    if (args->m == 0 || args->n == 0) return;
    gemm_plan plan = strided_plan(args, gc_gemm_kernel_for(args->dtype, isa), lda, ldb, ldc);
    gemm_matrix(&plan, args->a, args->b, args->c, false, NULL);
}

void gc_cpu_matmul(const gc_matmul_args *args) {
#ifdef GC_HAVE_BLAS
    product(args, gc_cpu_isa_selected(), gc_cpu_blas_enabled());
#else
    product(args, gc_cpu_isa_selected(), false);
#endif
}

const gc_gemm_kernel *gc_gemm_kernel_for(gc_dtype dtype, gc_cpu_isa isa) {
    bool f64 = dtype == GC_F64;
    switch (isa) {
#ifdef GC_HAVE_X86_KERNELS
    case GC_ISA_AVX2: return f64 ? &gc_gemm_avx2_f64 : &gc_gemm_avx2_f32;
    case GC_ISA_AVX512: return f64 ? &gc_gemm_avx512_f64 : &gc_gemm_avx512_f32;
#endif
    default: return f64 ? &gc_gemm_portable_f64 : &gc_gemm_portable_f32;
    }
}
