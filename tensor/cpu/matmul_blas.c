/* f32 and f64 matmul through a CBLAS (OpenBLAS), when the build has one (meson option
 * `blas`) and GC_BLAS is not 0. The library's own GEMM (matmul_cpu.c) stays the reference:
 * tests/test_gemm_variants.c checks this path against it.
 *
 * c is cut into tiles, one BLAS call each, shared out between the library's own threads
 * (thread_pool.h), with OpenBLAS's own threads turned off: two pools of spinning threads on
 * the same cores slow each other down, and a cut that does not follow the thread count
 * keeps the results independent of it. Products smaller than a few hundred
 * thousand multiply-adds (attention's, one per head) stay on the own kernel, which runs a
 * whole batch of them in one parallel call where each BLAS call would pay its overhead. */
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels_cpu.h"
#include "thread_pool.h"

/* Multiply-adds per product below which the own kernel is used. */
#define MIN_BLAS_WORK ((int64_t)1 << 18)
/* One BLAS call per tile of c, the tiles fixed by the shape and the machine's number of
 * CPUs, whatever the number of threads (GC_NUM_THREADS): the results of a BLAS call may
 * depend on its shape (its kernels for the edge rows, its blocking), so the calls must not
 * change with the split. Each call packs its rows of op(a) and the whole of op(b), and a
 * tile's packing is repeated by every other tile, so there are as few tiles as keep every
 * CPU busy: a tall product is cut into one tile of rows per CPU (of at least MIN_ROW_BLOCK
 * rows), and a product of fewer row blocks than CPUs (a weight gradient g^T x of a layer
 * with 128 outputs is one) by columns as well, into tiles of MIN_COLUMNS columns or more. */
#define MIN_ROW_BLOCK 128
#define MIN_COLUMNS 64
#define MAX_TILES 64

static bool enabled;
static int64_t tiles_wanted; /* the online CPUs, 1 to MAX_TILES */
static pthread_once_t enabled_once = PTHREAD_ONCE_INIT;

static void read_setting(void) {
    const char *text = getenv("GC_BLAS");
    enabled = !(text && strcmp(text, "0") == 0);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    tiles_wanted = cpus < 1 ? 1 : cpus > MAX_TILES ? MAX_TILES : cpus;
#ifdef GC_HAVE_OPENBLAS
    if (enabled) openblas_set_num_threads(1);
#endif
}

bool gc_cpu_blas_enabled(void) {
    pthread_once(&enabled_once, read_setting);
    return enabled;
}

/* The rows of one tile: m / tiles_wanted rounded up to a multiple of 16, MIN_ROW_BLOCK at
 * least. */
static int64_t tile_rows(int64_t m) {
    int64_t rows = ((m + tiles_wanted - 1) / tiles_wanted + 15) / 16 * 16;
    return rows > MIN_ROW_BLOCK ? rows : MIN_ROW_BLOCK;
}

/* The columns of one tile: the full width, or for a product of fewer row blocks than
 * tiles_wanted a part of it (a multiple of 16, the width of the BLAS's kernels). */
static int64_t tile_columns(int64_t m, int64_t n) {
    int64_t rows = tile_rows(m), row_blocks = (m + rows - 1) / rows;
    if (row_blocks >= tiles_wanted) return n;
    int64_t column_blocks = (tiles_wanted + row_blocks - 1) / row_blocks, most = n / MIN_COLUMNS;
    if (column_blocks > most) column_blocks = most;
    if (column_blocks <= 1) return n;
    int64_t width = ((n + column_blocks - 1) / column_blocks + 15) / 16 * 16;
    return width < n ? width : n;
}

/* The cut of one product's c into tiles, row block by row block. */
typedef struct blas_tiles {
    const gc_matmul_args *args;
    int64_t matrix;            /* which product of the batch */
    int64_t rows, columns;     /* per tile (the last row and column ones may be smaller) */
    int64_t col_tiles;         /* tiles per row block */
} blas_tiles;

/* The tile of c at rows [first_row, first_row + rows), columns [first_col, first_col + cols)
 * for one product of the batch: one BLAS call. */
static void multiply_tile(const gc_matmul_args *g, int64_t matrix, int64_t first_row, int rows, int64_t first_col,
                          int cols) {
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans, tb = g->trans_b ? CblasTrans : CblasNoTrans;
    int lda = g->trans_a ? m : k, ldb = g->trans_b ? k : n;
    /* Row i of op(a) starts at i lda when a is not transposed, at column i when it is;
     * column j of op(b) at column j when b is not transposed, at j ldb when it is. */
    int64_t a_first = matrix * g->m * g->k + (g->trans_a ? first_row : first_row * lda);
    int64_t b_first = matrix * g->k * g->n + (g->trans_b ? first_col * ldb : first_col);
    int64_t c_first = matrix * g->m * g->n + first_row * n + first_col;
    if (g->dtype == GC_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, k, g->alpha, (const float *)g->a + a_first, lda > 1 ? lda : 1,
                    (const float *)g->b + b_first, ldb > 1 ? ldb : 1, g->beta, (float *)g->c + c_first, n);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, rows, cols, k, g->alpha, (const double *)g->a + a_first, lda > 1 ? lda : 1,
                    (const double *)g->b + b_first, ldb > 1 ? ldb : 1, g->beta, (double *)g->c + c_first, n);
}

/* Tiles [first, last) of c for one product of the batch, row block by row block. */
static void multiply_tiles(void *arg, int64_t first, int64_t last) {
    const blas_tiles *job = arg;
    int64_t m = job->args->m, n = job->args->n;
    for (int64_t tile = first; tile < last; tile++) {
        int64_t row = tile / job->col_tiles * job->rows, col = tile % job->col_tiles * job->columns;
        multiply_tile(job->args, job->matrix, row, (int)(m - row < job->rows ? m - row : job->rows), col,
                      (int)(n - col < job->columns ? n - col : job->columns));
    }
}

void gc_cpu_matmul_blas(const gc_matmul_args *args) {
    gc_cpu_blas_enabled(); /* sets the BLAS's own threads and tiles_wanted once */
    int64_t work = args->m * args->n * args->k;
    bool fits_int = args->m <= INT_MAX && args->n <= INT_MAX && args->k <= INT_MAX;
    if (!fits_int || (args->batch > 1 && work < MIN_BLAS_WORK)) {
        gc_cpu_matmul_own(args, gc_cpu_isa_selected());
        return;
    }
    if (args->m == 0 || args->n == 0) return;
    int64_t rows = tile_rows(args->m), columns = tile_columns(args->m, args->n);
    int64_t col_tiles = (args->n + columns - 1) / columns, tiles = (args->m + rows - 1) / rows * col_tiles;
    int64_t tile_work = rows * columns * args->k;
    int64_t grain = tile_work > 0 && MIN_BLAS_WORK / tile_work > 1 ? MIN_BLAS_WORK / tile_work : 1;
    for (int64_t i = 0; i < args->batch; i++)
        gc_parallel_for(tiles, grain, multiply_tiles, &(blas_tiles){args, i, rows, columns, col_tiles});
}
