/* Collectives of the TCP ring against sequential references, in worlds of 1 to 4 processes
 * forked from this test: every reduce op and dtype, sizes that the world size does not
 * divide, fewer elements than ranks, one element, sizes spanning many pipelined segments,
 * reduce-scatter and all-gather with unequal rows per rank (zero included), broadcast from
 * every root, and asynchronous works waited out of order.
 *
 * Most inputs are small multiples of 1/4, whose sums are exact in every dtype: then the
 * ring's result must equal the sequential one bitwise, whatever order the ring added in. One
 * case uses values whose sums round, and allows the ring its different order (see there). */
#include "check.h"
#include "dist_spawn.h"
#include "dist/host_reduce.h"

static const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16, GC_I32};
static const gc_dist_op ops[] = {GC_DIST_SUM, GC_DIST_AVG, GC_DIST_MAX, GC_DIST_MIN};

/* Element i of rank r's input: an integer in [-8, 8] plus r/4 (an integer for i32). */
static double value_of(int64_t i, int rank, gc_dtype dtype) {
    double v = (double)((i * 7 + rank * 13) % 17 - 8);
    return dtype == GC_I32 ? v + rank : v + 0.25 * rank;
}

static gc_tensor *input_of(int64_t n, int rank, gc_dtype dtype) {
    double *values = malloc((size_t)(n ? n : 1) * sizeof *values);
    REQUIRE(values);
    for (int64_t i = 0; i < n; i++) values[i] = value_of(i, rank, dtype);
    gc_tensor *f64 = gc_from_host(values, GC_SHAPE(n), GC_F64, gc_cpu());
    gc_tensor *t = gc_cast(f64, dtype);
    REQUIRE(t);
    RELEASE(f64);
    free(values);
    return t;
}

/* The reference: every rank's input combined in rank order with the ring's own arithmetic. */
static gc_tensor *reference_of(int64_t n, int world, gc_dtype dtype, gc_dist_op op) {
    gc_tensor *acc = input_of(n, 0, dtype);
    for (int r = 1; r < world; r++) {
        gc_tensor *next = input_of(n, r, dtype);
        gc_host_reduce(dtype, op, gc_data(acc), gc_data(next), (size_t)n);
        RELEASE(next);
    }
    if (op == GC_DIST_AVG) gc_host_divide(dtype, gc_data(acc), (size_t)n, world);
    return acc;
}

static bool same_bytes(const gc_tensor *a, const gc_tensor *b) {
    return gc_nbytes(a) == gc_nbytes(b) && memcmp(gc_data(a), gc_data(b), gc_nbytes(a)) == 0;
}

/* Every rank holds the same bytes: the element-wise max and min over ranks equal one's own. */
static bool same_on_every_rank(gc_process_group *group, const gc_tensor *t) {
    gc_tensor *high = gc_clone(t), *low = gc_clone(t);
    REQUIRE(high && low);
    bool same = gc_dist_all_reduce(group, high, GC_DIST_MAX) == GC_OK &&
                gc_dist_all_reduce(group, low, GC_DIST_MIN) == GC_OK && same_bytes(high, t) && same_bytes(low, t);
    RELEASE(high, low);
    return same;
}

static void check_all_reduce(gc_process_group *group, int64_t n) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
            if (dtypes[d] == GC_I32 && ops[o] == GC_DIST_AVG) continue;
            gc_tensor *t = input_of(n, rank, dtypes[d]);
            gc_tensor *want = reference_of(n, world, dtypes[d], ops[o]);
            CHECK_MSG(gc_dist_all_reduce(group, t, ops[o]) == GC_OK, "%s", gc_last_error());
            CHECK_MSG(same_bytes(t, want), "all_reduce of %lld %s, op %d, world %d: not the sequential result",
                      (long long)n, gc_dtype_name(dtypes[d]), (int)ops[o], world);
            RELEASE(t, want);
        }
}

/* Values whose sums round (f32): the ring adds chunk c in the order c+1, c+2, ..., c, not
 * 0, 1, ...; each of the W-1 additions rounds once, so the two sums differ by at most
 * (W-1) * 2^-24 * sum of |x| per element. Every rank must still hold the same bytes. */
static void check_rounding_sums(gc_process_group *group) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    const int64_t n = 100003;
    float *mine = malloc(n * sizeof *mine);
    double *sum = calloc(n, sizeof *sum), *magnitude = calloc(n, sizeof *magnitude);
    REQUIRE(mine && sum && magnitude);
    for (int r = 0; r < world; r++)
        for (int64_t i = 0; i < n; i++) {
            float x = (float)sin(0.001 * (double)i * (r + 1) + r);
            if (r == rank) mine[i] = x;
            sum[i] += x;
            magnitude[i] += fabs(x);
        }
    gc_tensor *t = gc_from_host(mine, GC_SHAPE(n), GC_F32, gc_cpu());
    REQUIRE(t);
    CHECK(gc_dist_all_reduce(group, t, GC_DIST_SUM) == GC_OK);
    const float *got = gc_data(t);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += fabs(got[i] - sum[i]) > world * ldexp(1, -24) * magnitude[i];
    CHECK_MSG(bad == 0, "%lld of %lld sums beyond the rounding bound", (long long)bad, (long long)n);
    CHECK(same_on_every_rank(group, t));
    RELEASE(t);
    free(mine);
    free(sum);
    free(magnitude);
}

/* Rows [rows, 3] of value_of over the flat index. */
static gc_tensor *rows_of(int64_t rows, int rank, int64_t first_row) {
    double *values = malloc((size_t)(rows ? rows : 1) * 3 * sizeof *values);
    REQUIRE(values);
    for (int64_t i = 0; i < rows * 3; i++) values[i] = value_of(first_row * 3 + i, rank, GC_F32);
    gc_tensor *t = gc_from_host(values, GC_SHAPE(rows, 3), GC_F64, gc_cpu());
    gc_tensor *f32 = gc_cast(t, GC_F32);
    REQUIRE(f32);
    RELEASE(t);
    free(values);
    return f32;
}

static void check_reduce_scatter(gc_process_group *group, const int64_t *counts, int64_t total) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t mine = counts ? counts[rank] : total / world + (rank < total % world), start = 0;
    for (int r = 0; r < rank; r++) start += counts ? counts[r] : total / world + (r < total % world);
    gc_tensor *input = rows_of(total, rank, 0), *output = gc_empty(GC_SHAPE(mine, 3), GC_F32, gc_cpu());
    gc_tensor *want = reference_of(total * 3, world, GC_F32, GC_DIST_SUM);
    REQUIRE(output && want);
    CHECK_MSG(gc_dist_reduce_scatter(group, input, output, counts, GC_DIST_SUM) == GC_OK, "%s", gc_last_error());
    CHECK_MSG(mine == 0 || memcmp(gc_data(output), (float *)gc_data(want) + start * 3, (size_t)mine * 12) == 0,
              "reduce_scatter of %lld rows: rank %d's rows differ", (long long)total, rank);
    RELEASE(input, output, want);
}

static void check_all_gather(gc_process_group *group, const int64_t *counts) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t total = 0, start = 0;
    for (int r = 0; r < world; r++) total += counts[r];
    for (int r = 0; r < rank; r++) start += counts[r];
    gc_tensor *input = rows_of(counts[rank], rank, start), *output = gc_empty(GC_SHAPE(total, 3), GC_F32, gc_cpu());
    REQUIRE(output);
    CHECK_MSG(gc_dist_work_wait(gc_dist_all_gather_start(group, input, output, counts)) == GC_OK, "%s",
              gc_last_error());
    int64_t exchanged[DIST_SPAWN_MAX];
    gc_tensor *gathered = gc_dist_all_gather(group, input, exchanged);
    CHECK(gathered && same_bytes(gathered, output));
    /* row block of rank r holds rank r's values */
    int64_t row = 0;
    for (int r = 0; r < world; r++) {
        CHECK(exchanged[r] == counts[r]);
        gc_tensor *theirs = rows_of(counts[r], r, row);
        CHECK_MSG(counts[r] == 0 || memcmp((float *)gc_data(output) + row * 3, gc_data(theirs),
                                           (size_t)counts[r] * 12) == 0,
                  "all_gather: rank %d's rows differ on rank %d", r, rank);
        row += counts[r];
        RELEASE(theirs);
    }
    RELEASE(input, output, gathered);
}

static void check_broadcast(gc_process_group *group) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    for (int root = 0; root < world; root++) {
        gc_tensor *t = input_of(300001, rank, GC_F32), *want = input_of(300001, root, GC_F32);
        CHECK_MSG(gc_dist_broadcast(group, t, root) == GC_OK, "%s", gc_last_error());
        CHECK_MSG(same_bytes(t, want), "broadcast from %d: rank %d differs", root, rank);
        RELEASE(t, want);
    }
}

/* Five works in flight at once, waited newest first: they still complete in order. */
static void check_async(gc_process_group *group) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    gc_tensor *t[5], *want[5];
    gc_dist_work *work[5];
    for (int i = 0; i < 5; i++) {
        t[i] = input_of(1000 * (i + 1), rank, GC_F32);
        want[i] = reference_of(1000 * (i + 1), world, GC_F32, GC_DIST_SUM);
        work[i] = gc_dist_all_reduce_start(group, t[i], GC_DIST_SUM);
    }
    for (int i = 4; i >= 0; i--) CHECK(gc_dist_work_wait(work[i]) == GC_OK);
    for (int i = 0; i < 5; i++) {
        CHECK(same_bytes(t[i], want[i]));
        RELEASE(t[i], want[i]);
    }
}

static int body(int rank, int world, void *arg) {
    (void)arg;
    gc_process_group *group = dist_test_group(60);
    CHECK(gc_dist_rank(group) == rank && gc_dist_world_size(group) == world);
    gc_dist_stats before = gc_dist_get_stats(group);
    int64_t sizes[] = {1, world > 1 ? world - 1 : 1, 7, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) check_all_reduce(group, sizes[s]);
    gc_dist_stats after = gc_dist_get_stats(group);
    CHECK(after.collectives - before.collectives == 4 * 19);
    check_rounding_sums(group);
    int64_t ascending[DIST_SPAWN_MAX], gather_counts[DIST_SPAWN_MAX], total = 0;
    for (int r = 0; r < world; r++) {
        ascending[r] = r; /* rank 0 gets no row */
        gather_counts[r] = 2 * r + 1;
        total += r;
    }
    check_reduce_scatter(group, NULL, 10);
    check_reduce_scatter(group, NULL, 100003);
    check_reduce_scatter(group, ascending, total);
    check_all_gather(group, gather_counts);
    check_all_gather(group, ascending);
    check_broadcast(group);
    check_async(group);
    CHECK(gc_dist_barrier(group) == GC_OK);
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    for (int world = 1; world <= 4; world++) CHECK_MSG(dist_all_pass(world, body, NULL, 240), "world %d", world);
    return gc_test_result();
}
