/* Reductions over the last dim, softmax and log-softmax on the CPU. Everything is
 * accumulated in double (this backend is the reference the others are checked against)
 * and rounded once into the result's dtype.
 *
 * The semantics every backend follows:
 *  - the sum of an empty row is 0 and its mean 0/0 = nan (the front-end refuses a max
 *    of an empty row: there is no element to return);
 *  - max propagates nan as PyTorch does: the first nan of a row is its max and its
 *    index the argmax; otherwise ties go to the first index;
 *  - i32 sums are exact in double while they stay within 2^53 (so for any values in a
 *    row of up to 2^22 elements) and wrap modulo 2^32 into the i32 result, as
 *    two's-complement int32 addition does;
 *  - softmax subtracts the row max before exp, so no exp overflows whatever the scale
 *    of x; a row whose max is -inf (all -inf) or +inf, or that holds a nan, gives nan
 *    everywhere, as in PyTorch.
 * The one exception to double throughout is the f32 softmax (attention's, the hot one): its
 * exps are taken in float by the library's branch-free exp (erf_cpu.h, within 1 ulp), which
 * vectorises, where libm's double exp is a call per element with a slow path for the
 * underflows a masked row is full of. Its sum is still in double. That row is softmax_cpu.h's,
 * built for AVX2 too and chosen at run time. */
#include <math.h>

#include "erf_cpu.h"
#include "kernels_cpu.h"
#include "rows_cpu.h"
#include "softmax_cpu.h"
#include "thread_pool.h"

/* The max of the row x[first .. first + cols) (cols >= 1), and in *index the position
 * in the row of its first occurrence. */
static double row_max(const void *x, gc_dtype dtype, size_t first, size_t cols, size_t *index) {
    double chunk[GC_CPU_CHUNK], max = -INFINITY;
    *index = 0; /* also right for a row of all -inf, which no comparison below moves */
    for (size_t start = 0; start < cols && !isnan(max); start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        gc_load_span(x, dtype, first + start, len, chunk);
        for (size_t j = 0; j < len && !isnan(max); j++)
            if (chunk[j] > max || isnan(chunk[j])) {
                max = chunk[j];
                *index = start + j;
            }
    }
    return max;
}

/* out[row] = value: i32 through a wrap modulo 2^32 (a sum may leave the i32 range, and
 * an out-of-range conversion to a signed type is not defined in C), the float dtypes
 * rounded once. */
static void store_reduced(void *out, gc_dtype dtype, size_t row, double value) {
    if (dtype == GC_I32) ((uint32_t *)out)[row] = (uint32_t)(int64_t)value;
    else gc_store(out, dtype, row, value);
}

/* A row kernel's arguments; the threads split the rows, each row is one thread's. */
typedef struct rows_job {
    gc_reduce_op op;              /* reductions */
    bool log;                     /* softmax */
    double scale;                 /* softmax of scale x + bias */
    const gc_softmax_bias *bias;  /* or NULL */
    const void *x;
    void *out;
    int32_t *argmax;
    size_t cols;
    gc_dtype dtype;
} rows_job;

static void reduce_rows(void *arg, int64_t begin, int64_t end) {
    const rows_job *job = arg;
    size_t cols = job->cols;
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * cols, index = 0;
        double value = job->op == GC_REDUCE_MAX ? row_max(job->x, job->dtype, first, cols, &index)
                                                : gc_sum_span(job->x, job->dtype, first, cols);
        if (job->op == GC_REDUCE_MEAN) value /= (double)cols;
        store_reduced(job->out, job->dtype, row, value);
        if (job->argmax) job->argmax[row] = (int32_t)index;
    }
}

/* Rows per thread at least, for rows of `cols` elements. */
static int64_t row_grain(size_t cols) { return GC_GRAIN_ELEMENTS / (int64_t)(cols + 1) + 1; }

void gc_cpu_reduce_last(gc_reduce_op op, const void *x, void *out, int32_t *argmax, size_t rows,
                        size_t cols, gc_dtype dtype) {
    rows_job job = {.op = op, .x = x, .out = out, .argmax = argmax, .cols = cols, .dtype = dtype};
    gc_parallel_for((int64_t)rows, row_grain(cols), reduce_rows, &job);
}

/* --- sums over a middle dim: x [outer, mid, inner] -> out [outer, inner] ---
 * Each result element is the sum over m of x[o, m, i] in double, in lanes by m as a row is
 * summed (rows_cpu.h): the same additions in the same order as moving mid last and summing
 * rows, without the copy.
 * A thread takes a block of up to SUM_COLUMNS neighbouring columns of one o and walks down
 * mid, adding one contiguous stretch of a row per step into the lane's accumulators (a plain
 * loop the compiler vectorises): the rows are read front to back, in full when the block
 * spans them, which the prefetcher follows where narrow blocks would jump from row to row.
 * Blocks are narrowed (to a multiple of 16 columns) only when there are fewer of them than
 * threads: a bias gradient [B, T, H] -> [H] is one o, split by columns. */
#define SUM_COLUMNS 512

typedef struct middle_job {
    const void *x;
    void *out;
    size_t mid, inner, block_width, blocks_per_outer;
    gc_dtype dtype;
} middle_job;

static void sum_middle_blocks(void *arg, int64_t begin, int64_t end) {
    const middle_job *job = arg;
    for (size_t item = (size_t)begin; item < (size_t)end; item++) {
        size_t o = item / job->blocks_per_outer, first_col = item % job->blocks_per_outer * job->block_width;
        size_t width = job->inner - first_col < job->block_width ? job->inner - first_col : job->block_width;
        double lanes[GC_SUM_LANES][SUM_COLUMNS]; /* a lane's columns side by side */
        for (size_t lane = 0; lane < GC_SUM_LANES; lane++)
            for (size_t j = 0; j < width; j++) lanes[lane][j] = 0.0;
        for (size_t m = 0; m < job->mid; m++) {
            size_t first = (o * job->mid + m) * job->inner + first_col;
            double *acc = lanes[m % GC_SUM_LANES];
            if (job->dtype == GC_F32) {
                const float *x = (const float *)job->x + first;
                for (size_t j = 0; j < width; j++) acc[j] += x[j];
            } else {
                for (size_t j = 0; j < width; j++) acc[j] += gc_load(job->x, job->dtype, first + j);
            }
        }
        for (size_t j = 0; j < width; j++) {
            double column[GC_SUM_LANES] = {lanes[0][j], lanes[1][j], lanes[2][j], lanes[3][j]};
            store_reduced(job->out, job->dtype, o * job->inner + first_col + j, gc_lanes_total(column));
        }
    }
}

/* Columns per block: SUM_COLUMNS, or fewer when the blocks of full width would leave threads
 * idle. */
static size_t middle_block_width(size_t outer, size_t mid, size_t inner) {
    size_t width = inner < SUM_COLUMNS ? inner : SUM_COLUMNS;
    size_t blocks = outer * ((inner + width - 1) / width);
    int parts = gc_parallel_parts((int64_t)(outer * inner * mid), GC_GRAIN_ELEMENTS);
    if (width > 0 && blocks < (size_t)parts) {
        size_t per_part = (outer * inner + (size_t)parts - 1) / (size_t)parts;
        width = (per_part + 15) / 16 * 16; /* <= SUM_COLUMNS, as blocks < parts */
        if (width > inner) width = inner;
    }
    return width > 0 ? width : 1;
}

void gc_cpu_sum_middle(const void *x, void *out, size_t outer, size_t mid, size_t inner, gc_dtype dtype) {
    size_t width = middle_block_width(outer, mid, inner);
    size_t blocks_per_outer = (inner + width - 1) / width;
    middle_job job = {.x = x, .out = out, .mid = mid, .inner = inner, .block_width = width,
                      .blocks_per_outer = blocks_per_outer, .dtype = dtype};
    int64_t grain = GC_GRAIN_ELEMENTS / (int64_t)(mid * width + 1) + 1;
    gc_parallel_for((int64_t)(outer * blocks_per_outer), grain, sum_middle_blocks, &job);
}

/* One row x, y [cols] at `first`: y = exp(x - max) / sum exp(x - max), or for
 * log-softmax y = x - max - log(sum exp(x - max)). A row longer than one chunk has its
 * exps computed again in the last pass rather than kept, so that no row-sized buffer is
 * allocated; a row of one chunk (attention's) keeps them in the chunk: one exp per element. */
static void softmax_row(const void *x, void *y, size_t first, size_t cols, gc_dtype dtype,
                        bool log_softmax) {
    size_t unused_index;
    double max = row_max(x, dtype, first, cols, &unused_index);
    double chunk[GC_CPU_CHUNK], sum = 0.0;
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        gc_load_span(x, dtype, first + start, len, chunk);
        for (size_t j = 0; j < len; j++) {
            double e = exp(chunk[j] - max);
            sum += e;
            if (!log_softmax) chunk[j] = e;
        }
    }
    bool exps_kept = !log_softmax && cols <= GC_CPU_CHUNK;
    double log_sum = log(sum);
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        if (!exps_kept) gc_load_span(x, dtype, first + start, len, chunk);
        for (size_t j = 0; j < len; j++) {
            if (log_softmax) chunk[j] = chunk[j] - max - log_sum;
            else chunk[j] = (exps_kept ? chunk[j] : exp(chunk[j] - max)) / sum;
        }
        gc_store_span(y, dtype, first + start, len, chunk);
    }
}

/* Row `row` of scale x + bias written to y at y's precision, for the softmax to run over in
 * place: rounded as the unfused ops (a multiply, then an add) would round it (one pass over
 * the row instead of two over the tensor). f32 rows stage inside softmax_cpu.h's row. */
static void stage_scaled_row(const rows_job *job, size_t row) {
    size_t cols = job->cols, first = row * cols;
    const gc_softmax_bias *bias = job->bias;
    size_t bias_first = bias ? gc_softmax_bias_offset(bias, row) : 0;
    double chunk[GC_CPU_CHUNK], bias_chunk[GC_CPU_CHUNK];
    for (size_t start = 0; start < cols; start += GC_CPU_CHUNK) {
        size_t len = gc_chunk_len(cols, start);
        gc_load_span(job->x, job->dtype, first + start, len, chunk);
        if (bias) gc_load_span(bias->data, job->dtype, bias_first + start, len, bias_chunk);
        for (size_t j = 0; j < len; j++) chunk[j] = chunk[j] * job->scale + (bias ? bias_chunk[j] : 0.0);
        gc_store_span(job->out, job->dtype, first + start, len, chunk);
    }
}

void gc_cpu_softmax_row_f32_on(gc_cpu_isa isa, const float *x, const float *bias, float scale, bool staged, float *y,
                               size_t cols) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX2) {
        gc_softmax_scaled_row_f32_avx2(x, bias, scale, staged, y, cols);
        return;
    }
#endif
    (void)isa;
    gc_softmax_scaled_row_f32(x, bias, scale, staged, y, cols);
}

void gc_cpu_softmax_columns_f32_on(gc_cpu_isa isa, const float *x, const float *bias, float scale, bool staged,
                                   float *y, size_t places, size_t stride, size_t queries) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX2) {
        gc_softmax_scaled_columns_f32_avx2(x, bias, scale, staged, y, places, stride, queries);
        return;
    }
#endif
    (void)isa;
    gc_softmax_scaled_columns_f32(x, bias, scale, staged, y, places, stride, queries);
}

static void softmax_rows(void *arg, int64_t begin, int64_t end) {
    const rows_job *job = arg;
    bool staged = job->scale != 1.0 || job->bias;
    gc_cpu_isa isa = gc_cpu_isa_selected();
    for (size_t row = (size_t)begin; row < (size_t)end; row++) {
        size_t first = row * job->cols;
        if (job->dtype == GC_F32 && !job->log) {
            const float *bias = job->bias ? (const float *)job->bias->data + gc_softmax_bias_offset(job->bias, row)
                                          : NULL;
            gc_cpu_softmax_row_f32_on(isa, (const float *)job->x + first, bias, (float)job->scale, staged,
                                      (float *)job->out + first, job->cols);
            continue;
        }
        if (staged) stage_scaled_row(job, row);
        softmax_row(staged ? job->out : job->x, job->out, first, job->cols, job->dtype, job->log);
    }
}

void gc_cpu_softmax_last(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype, bool log, double scale,
                         const gc_softmax_bias *bias) {
    rows_job job = {.log = log, .scale = scale, .bias = bias, .x = x, .out = y, .cols = cols, .dtype = dtype};
    /* an exp per element: a few times the work of a sum */
    gc_parallel_for((int64_t)rows, row_grain(cols) / 4 + 1, softmax_rows, &job);
}
