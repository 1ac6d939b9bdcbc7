/* The CUDA reductions over the last dim (sum, mean, max with argmax), over everything and
 * over middle dims (sum_to_shape's sum_middle), against the CPU reference and against
 * hand-computed values. Suite cuda: skipped where there is no GPU. Tolerances: see
 * reduce_parity.h. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "reduce_parity.h"
#include "tensor/backend.h"
#include "tensor/launch_impl.h"

static const gc_dtype all_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64, GC_I32};
static const gc_dtype float_dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
static const int64_t col_sizes[] = {1, 7, 33, 1000, 4097};
#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

/* x [2, 3, cols] on the CPU: uniform in [-1, 1), or integers in [-1000, 1000) for i32. */
static gc_tensor *random_rows(int64_t cols, gc_dtype dtype, uint64_t seed) {
    const int64_t shape[3] = {2, 3, cols};
    if (dtype != GC_I32) return gc_test_random(3, shape, dtype, seed);
    gc_tensor *uniform = gc_test_random(3, shape, GC_F64, seed);
    double *values = gc_test_host_values(uniform);
    for (int64_t i = 0; i < gc_numel(uniform); i++) values[i] = floor(values[i] * 1000);
    gc_tensor *x = gc_test_from_doubles(values, 3, shape, GC_I32);
    free(values);
    gc_tensor_release(uniform);
    return x;
}

/* Both values NaN, or equal. */
static bool same_value(double got, double want) { return (isnan(got) && isnan(want)) || got == want; }

/* sum_last and mean_last of x (on the CPU) and x_gpu (its copy), within the summation
 * bound. The mean divides that bound by cols and adds the rounding of the division. */
static void check_sum_mean(const gc_tensor *x, const gc_tensor *x_gpu, bool keepdim, const char *what) {
    char label[160];
    int64_t cols = x->shape[x->ndim - 1];
    double sum_atol = gc_test_sum_error(cols, x->dtype) * gc_test_max_row_abs_sum(x);
    double step = gc_test_step_rtol(x->dtype);

    gc_tensor *want = gc_sum_last(x, keepdim), *got = gc_sum_last(x_gpu, keepdim);
    REQUIRE(want && got);
    snprintf(label, sizeof label, "sum_last %s", what);
    gc_test_expect_close(want, got, sum_atol, step, label);
    gc_tensor_release(want);
    gc_tensor_release(got);
    if (x->dtype == GC_I32) return; /* a mean is for floating dtypes */

    want = gc_mean_last(x, keepdim);
    got = gc_mean_last(x_gpu, keepdim);
    REQUIRE(want && got);
    snprintf(label, sizeof label, "mean_last %s", what);
    gc_test_expect_close(want, got, sum_atol / (double)cols, step + gc_test_accum_roundoff(x->dtype), label);
    gc_tensor_release(want);
    gc_tensor_release(got);
}

/* max_last: the max is one of the elements and the first index of it is unique, so both
 * must be exactly the CPU's. Also without asking for the argmax. */
static void check_max(const gc_tensor *x, const gc_tensor *x_gpu, bool keepdim, const char *what) {
    char label[160];
    gc_tensor *want_index = NULL, *got_index = NULL;
    gc_tensor *want = gc_max_last(x, keepdim, &want_index), *got = gc_max_last(x_gpu, keepdim, &got_index);
    gc_tensor *got_alone = gc_max_last(x_gpu, keepdim, NULL);
    REQUIRE(want && got && want_index && got_index && got_alone);
    snprintf(label, sizeof label, "max_last %s", what);
    gc_test_expect_close(want, got, 0, 0, label);
    gc_test_expect_close(want, got_alone, 0, 0, label);
    snprintf(label, sizeof label, "max_last argmax %s", what);
    gc_test_expect_close(want_index, got_index, 0, 0, label);
    gc_tensor_release(want);
    gc_tensor_release(got);
    gc_tensor_release(got_alone);
    gc_tensor_release(want_index);
    gc_tensor_release(got_index);
}

/* Random rows of every dtype and length, with and without keepdim. f16, bf16 and i32 rows
 * of 1000 or more elements repeat their max (f16 has 1024 values in [0.5, 1)), so they
 * check the first-index rule too. */
static void test_random_rows(void) {
    uint64_t seed = 1;
    for (int d = 0; d < COUNT(all_dtypes); d++) {
        for (int c = 0; c < COUNT(col_sizes); c++) {
            gc_tensor *x = random_rows(col_sizes[c], all_dtypes[d], seed++);
            gc_tensor *x_gpu = gc_test_to_cuda(x);
            for (int keepdim = 0; keepdim <= 1; keepdim++) {
                char what[96];
                snprintf(what, sizeof what, "%s [2, 3, %lld] keepdim %d", gc_dtype_name(all_dtypes[d]),
                         (long long)col_sizes[c], keepdim);
                check_sum_mean(x, x_gpu, keepdim, what);
                check_max(x, x_gpu, keepdim, what);
            }
            gc_tensor_release(x);
            gc_tensor_release(x_gpu);
        }
    }
}

/* Checks max_last of x_gpu [rows, cols] against want_max and want_index, row by row. */
static void expect_max_rows(const gc_tensor *x_gpu, const double *want_max, const int *want_index,
                            const char *what) {
    gc_tensor *index = NULL, *max = gc_max_last(x_gpu, false, &index);
    REQUIRE(max && index);
    double *got_max = gc_test_host_values(max), *got_index = gc_test_host_values(index);
    for (int64_t r = 0; r < gc_numel(max); r++)
        CHECK_MSG(same_value(got_max[r], want_max[r]) && got_index[r] == want_index[r],
                  "%s row %lld: max %g at %g, want %g at %d", what, (long long)r, got_max[r], got_index[r],
                  want_max[r], want_index[r]);
    free(got_max);
    free(got_index);
    gc_tensor_release(max);
    gc_tensor_release(index);
}

/* Equal maxima held by different threads: the first index wins, even against a lower
 * thread (with 1024 threads, index 4096 is thread 0's fifth element, 37 is thread 37's
 * first). x [3, 4097]: row 0 is 0 but 5 at 4096, 2000, 38 and 37; row 1 is all 1; row 2
 * is -1 but 2 at the last index. */
static void test_max_ties(void) {
    enum { rows = 3, cols = 4097 };
    double *values = malloc(sizeof(double) * rows * cols);
    REQUIRE(values);
    for (int i = 0; i < cols; i++) {
        values[i] = 0;
        values[cols + i] = 1;
        values[2 * cols + i] = -1;
    }
    values[4096] = values[2000] = values[38] = values[37] = 5;
    values[3 * cols - 1] = 2;
    const double want_max[rows] = {5, 1, 2};
    const int want_index[rows] = {37, 0, cols - 1};
    for (int d = 0; d < COUNT(all_dtypes); d++) {
        gc_tensor *x = gc_test_from_doubles(values, 2, (const int64_t[]){rows, cols}, all_dtypes[d]);
        gc_tensor *x_gpu = gc_test_to_cuda(x);
        expect_max_rows(x_gpu, want_max, want_index, gc_dtype_name(all_dtypes[d]));
        gc_tensor_release(x);
        gc_tensor_release(x_gpu);
    }
    free(values);
}

/* Infinities and NaN, x [3, 4097]: row 0 all -inf (max -inf at 0, sum -inf); row 1 +inf
 * at 0, NaN at 3000 and 100, 5 elsewhere (the first NaN is the max: at 100; sum NaN); row
 * 2 -inf at 10, +inf at 20, 0 elsewhere (max inf at 20; sum inf - inf = NaN). */
static void test_max_sum_nonfinite(void) {
    enum { rows = 3, cols = 4097 };
    double *values = malloc(sizeof(double) * rows * cols);
    REQUIRE(values);
    for (int i = 0; i < cols; i++) {
        values[i] = -INFINITY;
        values[cols + i] = 5;
        values[2 * cols + i] = 0;
    }
    values[cols] = INFINITY;
    values[cols + 3000] = values[cols + 100] = NAN;
    values[2 * cols + 10] = -INFINITY;
    values[2 * cols + 20] = INFINITY;
    const double want_max[rows] = {-INFINITY, NAN, INFINITY};
    const int want_index[rows] = {0, 100, 20};
    const double want_sum[rows] = {-INFINITY, NAN, NAN};
    for (int d = 0; d < COUNT(float_dtypes); d++) {
        const char *name = gc_dtype_name(float_dtypes[d]);
        gc_tensor *x = gc_test_from_doubles(values, 2, (const int64_t[]){rows, cols}, float_dtypes[d]);
        gc_tensor *x_gpu = gc_test_to_cuda(x);
        expect_max_rows(x_gpu, want_max, want_index, name);
        gc_tensor *sum = gc_sum_last(x_gpu, false), *mean = gc_mean_last(x_gpu, false);
        REQUIRE(sum && mean);
        double *got_sum = gc_test_host_values(sum), *got_mean = gc_test_host_values(mean);
        for (int r = 0; r < rows; r++) {
            /* the mean of a sum of -inf or NaN is the same -inf or NaN */
            CHECK_MSG(same_value(got_sum[r], want_sum[r]), "%s row %d: sum %g, want %g", name, r, got_sum[r],
                      want_sum[r]);
            CHECK_MSG(same_value(got_mean[r], want_sum[r]), "%s row %d: mean %g, want %g", name, r,
                      got_mean[r], want_sum[r]);
        }
        free(got_sum);
        free(got_mean);
        gc_tensor_release(sum);
        gc_tensor_release(mean);
        gc_tensor_release(x);
        gc_tensor_release(x_gpu);
    }
    free(values);
}

/* x [3, 0]: each empty row sums to 0 and has a NaN mean (0 / 0). */
static void test_empty_rows(void) {
    for (int d = 0; d < COUNT(all_dtypes); d++) {
        const char *name = gc_dtype_name(all_dtypes[d]);
        gc_tensor *x_gpu = gc_empty(GC_SHAPE(3, 0), all_dtypes[d], gc_cuda(0));
        gc_tensor *sum = gc_sum_last(x_gpu, false);
        gc_tensor *mean = all_dtypes[d] == GC_I32 ? NULL : gc_mean_last(x_gpu, false);
        REQUIRE(x_gpu && sum && (mean || all_dtypes[d] == GC_I32));
        CHECK(sum->ndim == 1 && sum->shape[0] == 3);
        if (gc_numel(sum) == 3) {
            double *got = gc_test_host_values(sum);
            for (int r = 0; r < 3; r++) CHECK_MSG(got[r] == 0, "%s row %d: sum %g, want 0", name, r, got[r]);
            free(got);
        }
        if (mean) {
            CHECK(mean->ndim == 1 && mean->shape[0] == 3);
            if (gc_numel(mean) == 3) {
                double *got = gc_test_host_values(mean);
                for (int r = 0; r < 3; r++)
                    CHECK_MSG(isnan(got[r]), "%s row %d: mean %g, want nan", name, r, got[r]);
                free(got);
            }
        }
        gc_tensor_release(sum);
        gc_tensor_release(mean);
        gc_tensor_release(x_gpu);
    }
}

/* sum_all, mean_all and max_all of x [1000, 1000], one row of 10^6 for the kernels. The
 * values are multiples of 1/8 in [-1, 1] (integers in [-8, 8] for i32), symmetric about 0
 * so that the sum stays far inside f16's range. Every partial sum is a multiple of 1/8
 * below 2^20 in magnitude, which float's 24 bits hold exactly, so any order of summation
 * gives the exact sum: the CUDA sum must equal the CPU's bit for bit, as must the max. The mean rounds the exact sum divided by 10^6 once (the CPU
 * perhaps twice, through double): one step of the stored type. */
static void test_all_exact(void) {
    const int64_t shape[2] = {1000, 1000};
    gc_tensor *uniform = gc_test_random(2, shape, GC_F64, 99);
    double *values = gc_test_host_values(uniform);
    for (int d = 0; d < COUNT(all_dtypes); d++) {
        gc_dtype dtype = all_dtypes[d];
        char label[64];
        double scale = dtype == GC_I32 ? 1 : 1.0 / 8;
        double *quantized = malloc(sizeof(double) * 1000 * 1000);
        REQUIRE(quantized);
        for (int64_t i = 0; i < 1000 * 1000; i++) quantized[i] = round(values[i] * 8) * scale;
        gc_tensor *x = gc_test_from_doubles(quantized, 2, shape, dtype);
        gc_tensor *x_gpu = gc_test_to_cuda(x);
        free(quantized);

        gc_tensor *want = gc_sum_all(x), *got = gc_sum_all(x_gpu);
        REQUIRE(want && got);
        snprintf(label, sizeof label, "sum_all %s", gc_dtype_name(dtype));
        gc_test_expect_close(want, got, 0, 0, label);
        gc_tensor_release(want);
        gc_tensor_release(got);

        want = gc_max_all(x);
        got = gc_max_all(x_gpu);
        REQUIRE(want && got);
        snprintf(label, sizeof label, "max_all %s", gc_dtype_name(dtype));
        gc_test_expect_close(want, got, 0, 0, label);
        gc_tensor_release(want);
        gc_tensor_release(got);

        if (dtype != GC_I32) {
            want = gc_mean_all(x);
            got = gc_mean_all(x_gpu);
            REQUIRE(want && got);
            snprintf(label, sizeof label, "mean_all %s", gc_dtype_name(dtype));
            gc_test_expect_close(want, got, 0, gc_test_step_rtol(dtype), label);
            gc_tensor_release(want);
            gc_tensor_release(got);
        }
        gc_tensor_release(x);
        gc_tensor_release(x_gpu);
    }
    free(values);
    gc_tensor_release(uniform);
}

/* One row of 10^7 f32, the longest the kernels are made for: ones but 2 at the end. Every
 * partial sum is an integer below 2^24, exact in float, so the sum is exactly 10^7 + 1;
 * the max is the 2 at the last index. */
static void test_longest_row(void) {
    enum { n = 10000000 };
    float *values = malloc(sizeof(float) * n);
    REQUIRE(values);
    for (int i = 0; i < n; i++) values[i] = 1;
    values[n - 1] = 2;
    gc_tensor *x_gpu = gc_from_host(values, 1, (const int64_t[]){n}, GC_F32, gc_cuda(0));
    free(values);
    gc_tensor *index = NULL;
    gc_tensor *sum = gc_sum_last(x_gpu, false), *mean = gc_mean_last(x_gpu, false);
    gc_tensor *max = gc_max_last(x_gpu, false, &index);
    REQUIRE(x_gpu && sum && mean && max && index);
    CHECK_NEAR(gc_item(sum), n + 1.0, 0, 0);
    /* the division by 10^7 rounds in float: one float step */
    CHECK_NEAR(gc_item(mean), (n + 1.0) / n, 0, 0x1p-23);
    CHECK_NEAR(gc_item(max), 2, 0, 0);
    CHECK_NEAR(gc_item(index), n - 1, 0, 0);
    gc_tensor_release(sum);
    gc_tensor_release(mean);
    gc_tensor_release(max);
    gc_tensor_release(index);
    gc_tensor_release(x_gpu);
}

/* --- sum_to_shape: sum_middle ---------------------------------------------------------- */

/* The bound on |CUDA sum - CPU sum| over mid, relative to sum |x_i| of a column (the terms
 * as in gc_test_sum_error). A column of inner 1 is a row for reduce_last's kernels
 * (reduce_cuda.cu), bounded as theirs. Otherwise a term goes through at most
 * ceil(segment / GC_MIDDLE_WARPS) additions in its lane, GC_MIDDLE_WARPS - 1 adding the
 * warps' sums and splits - 1 adding the segments' partials (tensor/launch_impl.h). */
static double middle_sum_error(int64_t outer, int64_t mid, int64_t inner, gc_dtype dtype) {
    if (inner == 1 || dtype == GC_I32) return gc_test_sum_error(mid, dtype);
    size_t splits = gc_middle_splits((size_t)outer, (size_t)mid, (size_t)inner);
    double additions = ceil(ceil((double)mid / (double)splits) / GC_MIDDLE_WARPS) + GC_MIDDLE_WARPS + (double)splits;
    return additions * gc_test_accum_roundoff(dtype) + (double)mid * 0x1p-53;
}

/* The largest sum |x_i| over mid of a column of x viewed as [outer, mid, inner] (read row
 * by row: a [131072, 256] x column by column would miss the cache at every element). */
static double max_column_abs_sum(const gc_tensor *x, int64_t outer, int64_t mid, int64_t inner) {
    double *values = gc_test_host_values(x), *sums = calloc((size_t)(inner ? inner : 1), sizeof(double));
    double largest = 0;
    REQUIRE(sums);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t c = 0; c < inner; c++) sums[c] = 0;
        for (int64_t m = 0; m < mid; m++)
            for (int64_t c = 0; c < inner; c++) sums[c] += fabs(values[(o * mid + m) * inner + c]);
        for (int64_t c = 0; c < inner; c++) largest = sums[c] > largest ? sums[c] : largest;
    }
    free(values);
    free(sums);
    return largest;
}

/* sum_to_shape of x (on the CPU) over its dims [first, first + count), one run followed by
 * kept dims, against the CUDA one within middle_sum_error; and the CUDA one twice, bit for
 * bit (the split depends on the sizes only). i32 values up to 2^30 wrap, exactly alike. */
static void check_sum_middle(int ndim, const int64_t *shape, int first, int count, gc_dtype dtype, uint64_t seed) {
    int64_t target[GC_MAX_DIMS], outer = 1, mid = 1, inner = 1;
    for (int d = 0; d < ndim; d++) {
        bool reduced = d >= first && d < first + count;
        target[d] = reduced ? 1 : shape[d];
        if (d < first) outer *= shape[d];
        else if (reduced) mid *= shape[d];
        else inner *= shape[d];
    }
    double bound = dtype == GC_I32 ? 1073741824.0 : 1.0;
    gc_tensor *x = gc_test_random_in(ndim, shape, dtype, -bound, bound, seed), *x_gpu = gc_test_to_cuda(x);
    gc_tensor *want = gc_sum_to_shape(x, ndim, target), *got = gc_sum_to_shape(x_gpu, ndim, target);
    gc_tensor *again = gc_sum_to_shape(x_gpu, ndim, target);
    REQUIRE(want && got && again);
    char what[160];
    snprintf(what, sizeof what, "sum_to_shape %s [%lld, %lld, %lld] over mid", gc_dtype_name(dtype),
             (long long)outer, (long long)mid, (long long)inner);
    double atol = middle_sum_error(outer, mid, inner, dtype) * max_column_abs_sum(x, outer, mid, inner);
    gc_test_expect_close(want, got, atol + gc_test_tiny(dtype), gc_test_step_rtol(dtype), what);
    strncat(what, ", run twice", sizeof what - strlen(what) - 1);
    gc_test_expect_close(got, again, 0, 0, what);
    gc_tensor_release(x);
    gc_tensor_release(x_gpu);
    gc_tensor_release(want);
    gc_tensor_release(got);
    gc_tensor_release(again);
}

/* Bias gradients and their kin, every dtype: [B, T, H] -> [H], [T, H] (outer 1, wide inner)
 * and [B, 1, H] (outer > 1); columns that fill no whole tile of 32; mid split into segments
 * of unequal length; inner 1 (a column: reduce_last's kernels); nothing to sum (zeros). */
static void test_sum_middle(void) {
    const struct {
        int ndim;
        int64_t shape[3];
        int first, count;
    } cases[] = {
        {3, {8, 32, 256}, 0, 2},   /* [B, T, H] -> [H]: 2 segments */
        {3, {64, 32, 96}, 0, 1},   /* -> [T, H]: 96 tiles, no split */
        {3, {6, 300, 40}, 1, 1},   /* -> [B, 1, H]: 6 slices of a tile and a part, 2 segments each */
        {3, {3, 1000, 33}, 0, 2},  /* 23 segments of 131 rows, the last 118 */
        {2, {40000, 70}, 0, 1},    /* 312 segments */
        {3, {4, 9, 1025}, 0, 2},   /* a last tile of one column */
        {3, {7, 500, 1}, 0, 2},    /* -> [1]: inner 1 */
        {3, {3, 5000, 1}, 1, 1},   /* -> [3, 1, 1]: inner 1, outer 3 */
        {2, {0, 7}, 0, 1},         /* mid 0: zeros */
    };
    const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16, GC_I32};
    uint64_t seed = 500;
    for (int c = 0; c < COUNT(cases); c++)
        for (int t = 0; t < COUNT(dtypes); t++)
            check_sum_middle(cases[c].ndim, cases[c].shape, cases[c].first, cases[c].count, dtypes[t], seed++);
}

/* A bias gradient of batch 4096 x 32 tokens, [131072, 256] -> [256]: 8 tiles of columns, 128
 * segments of 1024 rows (the split that fills a GPU). */
static void test_sum_middle_long(void) {
    check_sum_middle(2, (const int64_t[]){4096 * 32, 256}, 0, 1, GC_F32, 600);
    check_sum_middle(2, (const int64_t[]){4096 * 32, 256}, 0, 1, GC_BF16, 601);
}

/* mid 1, which sum_to_shape never asks (a dim of 1 is kept): the kernel itself copies x
 * [5, 1, 70] into out [5, 70], bit for bit (values in [-100, 100): whole i32 ones too). */
static void test_sum_middle_single(void) {
    for (int t = 0; t < COUNT(all_dtypes); t++) {
        gc_tensor *x = gc_test_random_in(2, (const int64_t[]){5, 70}, all_dtypes[t], -100, 100, 700 + (uint64_t)t);
        gc_tensor *x_gpu = gc_test_to_cuda(x), *out = gc_empty(GC_SHAPE(5, 70), all_dtypes[t], gc_cuda(0));
        REQUIRE(out);
        gc_backend_for(gc_cuda(0))->sum_middle(gc_data(x_gpu), gc_data(out), 5, 1, 70, all_dtypes[t]);
        gc_test_expect_close(x, out, 0, 0, gc_dtype_name(all_dtypes[t]));
        gc_tensor_release(x);
        gc_tensor_release(x_gpu);
        gc_tensor_release(out);
    }
}

/* Host threads that reduce long rows at once on one device: each split writes its partials
 * into the device's one scratch, so without the split lock (reduce_cuda.cu) a split queued
 * between another's two launches would overwrite its partials. A third of the threads sum,
 * a third take the max (other instantiations, the same scratch), a third sum x viewed as
 * [4096, 256] over its rows (sum_middle's split: 32 segments), then that [256] (no split);
 * every result must be the one the thread got alone, bit for bit (a split is
 * deterministic). */
enum { split_threads = 6, split_repeats = 40 };

typedef struct split_job {
    gc_tensor *x;   /* [2^20] f32 on cuda:0 (64 segments), [4096, 256] for the column sums */
    double alone;   /* its reduction (reduce_job), before the threads start */
    int wrong;      /* repeats that gave anything else */
} split_job;

static double reduce_job(const split_job *job, int index) {
    gc_tensor *columns = NULL, *result = NULL;
    if (index % 3 == 0) result = gc_sum_all(job->x);
    else if (index % 3 == 1) result = gc_max_all(job->x);
    else {
        columns = gc_sum_to_shape(job->x, GC_SHAPE(256));
        result = gc_sum_all(columns);
    }
    REQUIRE(result);
    double value = gc_item(result);
    gc_tensor_release(columns);
    gc_tensor_release(result);
    return value;
}

static split_job split_jobs[split_threads];

static void *reduce_repeatedly(void *arg) {
    int index = (int)(intptr_t)arg;
    split_job *job = &split_jobs[index];
    for (int r = 0; r < split_repeats; r++) job->wrong += reduce_job(job, index) != job->alone;
    return NULL;
}

static void test_splits_from_threads(void) {
    const int64_t n = (int64_t)1 << 20;
    pthread_t threads[split_threads];
    for (int t = 0; t < split_threads; t++) {
        gc_tensor *x = gc_test_random(1, &n, GC_F32, 900 + (uint64_t)t), *x_gpu = gc_test_to_cuda(x);
        /* viewed here, not in the threads: a view counts references without atomics */
        gc_tensor *job_x = t % 3 == 2 ? gc_reshape(x_gpu, GC_SHAPE(4096, 256)) : gc_tensor_retain(x_gpu);
        split_jobs[t] = (split_job){job_x, 0, 0};
        REQUIRE(split_jobs[t].x);
        gc_tensor_release(x);
        gc_tensor_release(x_gpu);
        split_jobs[t].alone = reduce_job(&split_jobs[t], t);
    }
    for (int t = 0; t < split_threads; t++)
        REQUIRE(pthread_create(&threads[t], NULL, reduce_repeatedly, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < split_threads; t++) {
        REQUIRE(pthread_join(threads[t], NULL) == 0);
        const char *kinds[] = {"sums", "maxes", "column sums"};
        CHECK_MSG(split_jobs[t].wrong == 0, "thread %d: %d of %d %s differ from the one reduced alone", t,
                  split_jobs[t].wrong, split_repeats, kinds[t % 3]);
        gc_tensor_release(split_jobs[t].x);
    }
}

int main(void) {
    gc_test_require_cuda();
    GC_TEST_CASE(test_random_rows);
    GC_TEST_CASE(test_max_ties);
    GC_TEST_CASE(test_max_sum_nonfinite);
    GC_TEST_CASE(test_empty_rows);
    GC_TEST_CASE(test_all_exact);
    GC_TEST_CASE(test_longest_row);
    GC_TEST_CASE(test_sum_middle);
    GC_TEST_CASE(test_sum_middle_long);
    GC_TEST_CASE(test_sum_middle_single);
    GC_TEST_CASE(test_splits_from_threads);
    return gc_test_result();
}
