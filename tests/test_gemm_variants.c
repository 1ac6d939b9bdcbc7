/* The CPU GEMM's variants against a reference: the portable kernel, each SIMD kernel this
 * CPU offers (AVX2+FMA, AVX-512) and, where the build has one, the BLAS path, on shapes
 * that hit every edge (partial tiles, k = 0, k across several depth blocks, transposes,
 * batches, alpha and beta), and the strided entry (blocks of wider matrices) bit for bit the
 * contiguous one.
 *
 * Tolerance: each element of c is a sum of k products; in working precision u (2^-24 for
 * f32, 2^-53 for f64) any summation order, fused or not, errs by at most
 * gamma_k sum_p |a_ip b_pj| with gamma_k = k u / (1 - k u) (Higham, Accuracy and Stability,
 * 3.1), plus one rounding for alpha and one for beta c. The test allows twice that, against
 * an exact-enough long double reference: it fails on any indexing error (a wrong product is
 * off by about |a b|, far above the bound) while allowing every variant's own order. */
#include <float.h>

#include "check.h"
#include "tensor/cpu/kernels_cpu.h"

typedef struct shape {
    int64_t batch, m, k, n;
    bool trans_a, trans_b;
    float alpha, beta;
} shape;

static const shape shapes[] = {
    {1, 1, 1, 1, false, false, 1, 0},       {1, 7, 5, 3, false, false, 1, 0},
    {1, 13, 300, 37, true, false, 1, 0},    {1, 61, 257, 33, false, true, 1, 0},
    {1, 97, 529, 101, true, true, 1, 0},    {1, 200, 64, 520, false, false, 1, 0},
    {1, 5, 0, 7, false, false, 1, 0.5f},    {1, 23, 19, 29, false, false, -0.75f, 0.5f},
    {7, 9, 17, 11, false, true, 1, 0},      {3, 130, 90, 70, true, false, 2, 1},
    {2, 4097, 3, 2, false, false, 1, 0},    {1, 3, 40, 3100, false, true, 1, 0},
    {2, 100, 50, 300, true, true, 0.5f, 1}, /* the BLAS path's column tiles, a batch, beta */
    {1, 7, 300, 700, false, true, 1, 0.5f}, /* few rows: the own GEMM shares out op(b)'s panels */
    {1, 10, 70, 40, false, false, 1, 0},    /* an edge tile of 4 rows (the others: 1, 2, 3 and 5) */
};

typedef struct operands {
    gc_tensor *a, *b, *c0;            /* [batch, m or k, ...] in the layout the flags say */
    long double *want, *bound;        /* [batch, m, n] */
} operands;

static double value_at(const gc_tensor *t, int64_t i) {
    return gc_dtype_size(t->dtype) == 4 ? ((const float *)gc_data(t))[i] : ((const double *)gc_data(t))[i];
}

static operands make_operands(const shape *s, gc_dtype dtype, uint64_t seed) {
    operands o;
    int64_t count_a = s->batch * s->m * s->k, count_b = s->batch * s->k * s->n, count_c = s->batch * s->m * s->n;
    o.a = gc_uniform(1, (int64_t[]){count_a}, dtype, gc_cpu(), -1, 1, seed, 0);
    o.b = gc_uniform(1, (int64_t[]){count_b}, dtype, gc_cpu(), -1, 1, seed + 1, 0);
    o.c0 = gc_uniform(1, (int64_t[]){count_c}, dtype, gc_cpu(), -1, 1, seed + 2, 0);
    o.want = malloc((size_t)(count_c ? count_c : 1) * sizeof *o.want);
    o.bound = malloc((size_t)(count_c ? count_c : 1) * sizeof *o.bound);
    REQUIRE(o.a && o.b && o.c0 && o.want && o.bound);
    long double u = dtype == GC_F32 ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
    long double gamma = s->k * u / (1 - s->k * u);
    for (int64_t i = 0; i < s->batch; i++)
        for (int64_t row = 0; row < s->m; row++)
            for (int64_t col = 0; col < s->n; col++) {
                long double sum = 0, magnitude = 0;
                for (int64_t p = 0; p < s->k; p++) {
                    int64_t ia = i * s->m * s->k + (s->trans_a ? p * s->m + row : row * s->k + p);
                    int64_t ib = i * s->k * s->n + (s->trans_b ? col * s->k + p : p * s->n + col);
                    long double product = (long double)value_at(o.a, ia) * value_at(o.b, ib);
                    sum += product;
                    magnitude += fabsl(product);
                }
                int64_t ic = (i * s->m + row) * s->n + col;
                long double c = s->beta == 0 ? 0 : (long double)s->beta * value_at(o.c0, ic);
                o.want[ic] = s->alpha * sum + c;
                o.bound[ic] = 2 * (fabsl(s->alpha) * (gamma * magnitude + u * fabsl(sum)) + 2 * u * fabsl(c) + u * fabsl(o.want[ic])) + 1e-30L;
            }
    return o;
}

static void free_operands(operands *o) {
    RELEASE(o->a, o->b, o->c0);
    free(o->want);
    free(o->bound);
}

/* c of the path `run` (0: the own GEMM on `isa`, 1: the BLAS) for the operands. */
static gc_tensor *product(const shape *s, const operands *o, gc_dtype dtype, int path, gc_cpu_isa isa) {
    gc_tensor *c = gc_clone(o->c0);
    REQUIRE(c);
    gc_matmul_args args = {.a = gc_data(o->a), .b = gc_data(o->b), .c = gc_data(c), .dtype = dtype, .batch = s->batch,
                           .m = s->m, .n = s->n, .k = s->k, .trans_a = s->trans_a, .trans_b = s->trans_b,
                           .alpha = s->alpha, .beta = s->beta};
#ifdef GC_HAVE_BLAS
    if (path == 1) {
        gc_cpu_matmul_blas(&args);
        return c;
    }
#endif
    (void)path;
    gc_cpu_matmul_own(&args, isa);
    return c;
}

static void expect_within_bound(const shape *s, const operands *o, const gc_tensor *c, const char *what) {
    int64_t count = s->batch * s->m * s->n, bad = 0, first = -1;
    for (int64_t i = 0; i < count; i++)
        if (!(fabsl(value_at(c, i) - o->want[i]) <= o->bound[i]) && bad++ == 0) first = i;
    CHECK_MSG(bad == 0, "%s %s [%lld x %lld x %lld x %lld]%s%s: %lld elements out of bounds, first %lld: %.9g, want %.9Lg",
              what, gc_dtype_name(c->dtype), (long long)s->batch, (long long)s->m, (long long)s->k,
              (long long)s->n, s->trans_a ? " a^T" : "", s->trans_b ? " b^T" : "", (long long)bad, (long long)first,
              first >= 0 ? value_at(c, first) : 0.0, first >= 0 ? o->want[first] : 0.0L);
}

static void test_every_variant(void) {
    int variants = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++) {
            gc_dtype dtype = d ? GC_F64 : GC_F32;
            const shape *s = &shapes[i];
            operands o = make_operands(s, dtype, 100 + 3 * i);
            for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++) {
                if (!gc_cpu_isa_available(isa)) continue;
                gc_tensor *c = product(s, &o, dtype, 0, isa);
                expect_within_bound(s, &o, c, gc_cpu_isa_name(isa));
                gc_tensor_release(c);
                variants++;
            }
#ifdef GC_HAVE_BLAS
            gc_tensor *c = product(s, &o, dtype, 1, GC_ISA_PORTABLE);
            expect_within_bound(s, &o, c, "blas");
            gc_tensor_release(c);
#endif
            free_operands(&o);
        }
    fprintf(stderr, "own kernels checked: %d (shape, dtype, isa) cases; isa selected here: %s\n", variants,
            gc_cpu_isa_name(gc_cpu_isa_selected()));
}

/* The BLAS path cuts c into tiles fixed by the shape and the machine's CPUs whatever the
 * threads: bitwise the same with 1, 2, 3 and 8 threads (the own kernel:
 * tests/test_threads.c). Row tiles, and (one row block, as a weight gradient g^T x of a
 * 128-output layer has) column tiles on any machine of 2 CPUs or more. */
static void test_blas_thread_independence(void) {
#ifdef GC_HAVE_BLAS
    const shape shapes_cut[] = {{1, 1031, 300, 517, false, true, 1, 0}, {1, 100, 700, 517, true, false, 1, 0}};
    for (int s = 0; s < 2; s++) {
        operands o = make_operands(&shapes_cut[s], GC_F32, 7);
        gc_set_cpu_threads(1);
        gc_tensor *one = product(&shapes_cut[s], &o, GC_F32, 1, GC_ISA_PORTABLE);
        const int counts[] = {2, 3, 8};
        for (int i = 0; i < 3; i++) {
            gc_set_cpu_threads(counts[i]);
            gc_tensor *c = product(&shapes_cut[s], &o, GC_F32, 1, GC_ISA_PORTABLE);
            CHECK_MSG(memcmp(gc_data(c), gc_data(one), gc_nbytes(c)) == 0, "blas: m = %lld, %d threads differ from 1",
                      (long long)shapes_cut[s].m, counts[i]);
            gc_tensor_release(c);
        }
        gc_tensor_release(one);
        free_operands(&o);
    }
#endif
}

/* A SIMD kernel reads an op(a) whose depth is contiguous where it lies (tile_in_place)
 * instead of packing it: the same products in the same order, so bit for bit what the packed
 * path gives on the same op(a) stored transposed (which it packs). Returns the cases compared. */
static int compare_in_place_with_packed(const shape *s, gc_dtype dtype, uint64_t seed) {
    int compared = 0;
    operands o = make_operands(s, dtype, seed);
    shape transposed = *s;
    transposed.trans_a = true;
    operands t = o; /* the same b and c, a stored [k, m] per matrix */
    t.a = gc_empty(GC_SHAPE(s->batch, s->k, s->m), dtype, gc_cpu());
    REQUIRE(t.a);
    size_t size = gc_dtype_size(dtype);
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t row = 0; row < s->m; row++)
            for (int64_t p = 0; p < s->k; p++)
                memcpy((char *)gc_data(t.a) + (size_t)((b * s->k + p) * s->m + row) * size,
                       (const char *)gc_data(o.a) + (size_t)((b * s->m + row) * s->k + p) * size, size);
    for (gc_cpu_isa isa = GC_ISA_PORTABLE + 1; isa < GC_ISA_COUNT; isa++) {
        if (!gc_cpu_isa_available(isa)) continue;
        gc_tensor *in_place = product(s, &o, dtype, 0, isa), *packed = product(&transposed, &t, dtype, 0, isa);
        CHECK_MSG(memcmp(gc_data(in_place), gc_data(packed), gc_nbytes(packed)) == 0,
                  "%s %s [%lld x %lld x %lld x %lld]: op(a) read in place differs from op(a) packed",
                  gc_cpu_isa_name(isa), gc_dtype_name(dtype), (long long)s->batch, (long long)s->m, (long long)s->k,
                  (long long)s->n);
        RELEASE(in_place, packed);
        compared++;
    }
    gc_tensor_release(t.a);
    free_operands(&o);
    return compared;
}

/* The shapes above, and every height of an in-place tile: 1 to 25 rows (AVX-512 reads op(a)
 * in place 12 rows at a time, a packed panel has 6), n = 45 for a partial panel of op(b) of
 * either width. */
static void test_in_place_matches_packed(void) {
    int compared = 0;
    for (int d = 0; d < 2; d++) {
        gc_dtype dtype = d ? GC_F64 : GC_F32;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (!shapes[i].trans_a) compared += compare_in_place_with_packed(&shapes[i], dtype, 300 + 5 * i);
        for (int64_t m = 1; m <= 25; m++) {
            shape height = {1, m, 37, 45, false, true, 1, m % 2 ? 0.5f : 0};
            compared += compare_in_place_with_packed(&height, dtype, 500 + (uint64_t)m);
        }
    }
    fprintf(stderr, "op(a) in place against packed: %d cases bitwise\n", compared);
}

/* `rows` rows of `width` elements, contiguous at `from`, copied into rows `stride` apart at
 * `to` (whose other elements stay as they are). */
static void spread_rows(char *to, const char *from, int64_t rows, int64_t width, int64_t stride, size_t size) {
    for (int64_t r = 0; r < rows; r++)
        memcpy(to + (size_t)(r * stride) * size, from + (size_t)(r * width) * size, (size_t)width * size);
}

/* gc_cpu_matmul_strided reads a and b and writes c as blocks of wider matrices (row strides
 * past their widths): bit for bit what gc_cpu_matmul_own gives on the contiguous operands,
 * for each transpose, alpha and beta (the one products of the shapes), and nothing between
 * c's rows is written. */
static void test_strided_matches_contiguous(void) {
    enum { GAP = 5 }; /* elements past each row */
    int compared = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++) {
            const shape *s = &shapes[i];
            if (s->batch != 1) continue;
            gc_dtype dtype = d ? GC_F64 : GC_F32;
            size_t size = gc_dtype_size(dtype);
            operands o = make_operands(s, dtype, 500 + 7 * i);
            int64_t a_rows = s->trans_a ? s->k : s->m, a_width = s->trans_a ? s->m : s->k;
            int64_t b_rows = s->trans_b ? s->n : s->k, b_width = s->trans_b ? s->k : s->n;
            int64_t lda = a_width + GAP, ldb = b_width + GAP, ldc = s->n + GAP;
            char *a = calloc((size_t)(a_rows * lda + 1), size), *b = calloc((size_t)(b_rows * ldb + 1), size);
            char *c = malloc((size_t)(s->m * ldc + 1) * size);
            REQUIRE(a && b && c);
            spread_rows(a, gc_data(o.a), a_rows, a_width, lda, size);
            spread_rows(b, gc_data(o.b), b_rows, b_width, ldb, size);
            for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++) {
                if (!gc_cpu_isa_available(isa)) continue;
                memset(c, 0x7f, (size_t)(s->m * ldc + 1) * size); /* a pattern no product writes */
                spread_rows(c, gc_data(o.c0), s->m, s->n, ldc, size);
                gc_matmul_args args = {.a = a, .b = b, .c = c, .dtype = dtype, .batch = 1, .m = s->m, .n = s->n,
                                       .k = s->k, .trans_a = s->trans_a, .trans_b = s->trans_b,
                                       .alpha = s->alpha, .beta = s->beta};
                gc_cpu_matmul_strided(&args, lda, ldb, ldc, isa);
                gc_tensor *want = product(s, &o, dtype, 0, isa);
                bool same = true, gaps_kept = true;
                for (int64_t row = 0; row < s->m; row++) {
                    const char *got_row = c + (size_t)(row * ldc) * size;
                    same = same && memcmp(got_row, (const char *)gc_data(want) + (size_t)(row * s->n) * size,
                                          (size_t)s->n * size) == 0;
                    for (size_t byte = (size_t)s->n * size; byte < (size_t)ldc * size; byte++)
                        gaps_kept = gaps_kept && got_row[byte] == 0x7f;
                }
                CHECK_MSG(same && gaps_kept, "%s %s [%lld x %lld x %lld]%s%s: strided %s", gc_cpu_isa_name(isa),
                          gc_dtype_name(dtype), (long long)s->m, (long long)s->k, (long long)s->n,
                          s->trans_a ? " a^T" : "", s->trans_b ? " b^T" : "",
                          same ? "wrote between c's rows" : "differs from contiguous");
                gc_tensor_release(want);
                compared++;
            }
            free(a);
            free(b);
            free(c);
            free_operands(&o);
        }
    fprintf(stderr, "strided against contiguous: %d cases bitwise\n", compared);
}

/* GC_CPU_KERNELS caps the choice (read once per process: in children). */
typedef struct selection_case {
    const char *cap;
    gc_cpu_isa want;
} selection_case;

static bool selects_as_expected(void *arg) {
    const selection_case *c = arg;
    setenv("GC_CPU_KERNELS", c->cap, 1);
    return gc_cpu_isa_selected() == c->want;
}

static void expect_selected(const char *cap, gc_cpu_isa want) {
    CHECK_MSG(gc_test_true_in_child(selects_as_expected, &(selection_case){cap, want}),
              "GC_CPU_KERNELS=%s should select %s", cap, gc_cpu_isa_name(want));
}

static void select_unknown(void *arg) {
    setenv("GC_CPU_KERNELS", arg, 1);
    gc_cpu_isa_selected();
}

static void test_selection(void) {
    expect_selected("portable", GC_ISA_PORTABLE);
    expect_selected("avx2", gc_cpu_isa_available(GC_ISA_AVX2) ? GC_ISA_AVX2 : GC_ISA_PORTABLE);
    gc_cpu_isa best = GC_ISA_PORTABLE;
    for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++)
        if (gc_cpu_isa_available(isa)) best = isa;
    expect_selected("avx512", best);
    gc_test_expect_fatal(select_unknown, (char[]){"sse9"},
                         "cpu kernels: GC_CPU_KERNELS=sse9 is none of portable, avx2, avx512");
}

int main(void) {
    test_selection();
    test_every_variant();
    test_in_place_matches_packed();
    test_strided_matches_contiguous();
    test_blas_thread_independence();
    return gc_test_result();
}
