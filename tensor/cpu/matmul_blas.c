/* f32 and f64 matmul through a CBLAS (OpenBLAS), when the build has one (meson option
 * `blas`) and GC_BLAS is not 0. The library's own GEMM (matmul_cpu.c) stays the reference:
 * tests/test_blas.c checks this path against it.
 *
 * The rows of c are cut into fixed blocks, one BLAS call each, shared out between the
 * library's own threads (thread_pool.h), with OpenBLAS's own threads turned off: two pools
 * of spinning threads on the same cores slow each other down, and a fixed cut keeps the
 * results independent of the thread count. Products smaller than a few hundred
 * thousand multiply-adds (attention's, one per head) stay on the own kernel, which runs a
 * whole batch of them in one parallel call where each BLAS call would pay its overhead. */
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "thread_pool.h"

/* Multiply-adds per product below which the own kernel is used. */
#define MIN_BLAS_WORK ((int64_t)1 << 18)
/* One BLAS call per block of this many rows of c, whatever the number of threads: the
 * results of a BLAS call may depend on its shape (its kernels for the edge rows, its
 * blocking), so the calls must not change with the split. */
#define ROW_BLOCK 128

static bool enabled;
static pthread_once_t enabled_once = PTHREAD_ONCE_INIT;

static void read_setting(void) {
    const char *text = getenv("GC_BLAS");
    enabled = !(text && strcmp(text, "0") == 0);
#ifdef GC_HAVE_OPENBLAS
    if (enabled) openblas_set_num_threads(1);
#endif
}

bool gc_cpu_blas_enabled(void) {
    pthread_once(&enabled_once, read_setting);
    return enabled;
}

typedef struct blas_rows {
    const gc_matmul_args *args;
    int64_t matrix; /* which product of the batch */
} blas_rows;

/* Rows [first, first + rows) of c for one product of the batch: one BLAS call. */
static void multiply_block(const gc_matmul_args *g, int64_t matrix, int64_t first, int rows) {
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans, tb = g->trans_b ? CblasTrans : CblasNoTrans;
    int lda = g->trans_a ? m : k, ldb = g->trans_b ? k : n;
    /* Row i of op(a) starts at i lda when a is not transposed, at column i when it is. */
    int64_t a_first = matrix * g->m * g->k + (g->trans_a ? first : first * lda);
    int64_t b_first = matrix * g->k * g->n, c_first = matrix * g->m * g->n + first * n;
    if (g->dtype == GC_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, rows, n, k, g->alpha, (const float *)g->a + a_first, lda > 1 ? lda : 1,
                    (const float *)g->b + b_first, ldb > 1 ? ldb : 1, g->beta, (float *)g->c + c_first, n);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, rows, n, k, g->alpha, (const double *)g->a + a_first, lda > 1 ? lda : 1,
                    (const double *)g->b + b_first, ldb > 1 ? ldb : 1, g->beta, (double *)g->c + c_first, n);
}

/* Row blocks [first, last) of c for one product of the batch. */
static void multiply_blocks(void *arg, int64_t first, int64_t last) {
    const blas_rows *job = arg;
    int64_t m = job->args->m;
    for (int64_t block = first; block < last; block++) {
        int64_t row = block * ROW_BLOCK;
        multiply_block(job->args, job->matrix, row, (int)(m - row < ROW_BLOCK ? m - row : ROW_BLOCK));
    }
}

void gc_cpu_matmul_blas(const gc_matmul_args *args) {
    gc_cpu_blas_enabled(); /* sets the BLAS's own threads once */
    int64_t work = args->m * args->n * args->k;
    bool fits_int = args->m <= INT_MAX && args->n <= INT_MAX && args->k <= INT_MAX;
    if (!fits_int || (args->batch > 1 && work < MIN_BLAS_WORK)) {
        gc_cpu_matmul_own(args, gc_cpu_isa_selected());
        return;
    }
    if (args->m == 0 || args->n == 0) return;
    int64_t blocks = (args->m + ROW_BLOCK - 1) / ROW_BLOCK, block_work = ROW_BLOCK * args->n * args->k;
    int64_t grain = block_work > 0 && MIN_BLAS_WORK / block_work > 1 ? MIN_BLAS_WORK / block_work : 1;
    for (int64_t i = 0; i < args->batch; i++) gc_parallel_for(blocks, grain, multiply_blocks, &(blas_rows){args, i});
}
