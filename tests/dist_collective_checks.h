/* The collective checks of the dist suite, for any backend and device: each compares the
 * group's result with a sequential reference computed on the CPU. Inputs are made on the
 * CPU and moved to `device` (where the collectives run); results are compared on the host.
 *
 * Most inputs are small multiples of 1/4, whose sums are exact in every dtype: then the
 * group's result must equal the sequential one bitwise, whatever order it added in. One
 * case uses values whose sums round, and allows another order of addition (see there). */
#ifndef GC_TESTS_DIST_COLLECTIVE_CHECKS_H
#define GC_TESTS_DIST_COLLECTIVE_CHECKS_H

#include "check.h"
#include "dist/host_reduce.h"
#include "dist_spawn.h"

static const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16, GC_I32};
static const gc_dist_op ops[] = {GC_DIST_SUM, GC_DIST_AVG, GC_DIST_MAX, GC_DIST_MIN};

/* t (a reference this takes over) moved to `device`. */
static gc_tensor *moved(gc_tensor *t, gc_device device) {
    REQUIRE(t);
    if (gc_device_equal(t->device, device)) return t;
    gc_tensor *there = gc_to_device(t, device);
    REQUIRE(there);
    gc_tensor_release(t);
    return there;
}

/* Element i of rank r's input: an integer in [-8, 8] plus r/4 (plus r for i32). */
static double value_of(int64_t i, int rank, gc_dtype dtype) {
    double v = (double)((i * 7 + rank * 13) % 17 - 8);
    return dtype == GC_I32 ? v + rank : v + 0.25 * rank;
}

/* Values [n / width, width] (or [n] for width 0) on the CPU. */
static gc_tensor *values_of(int64_t n, int64_t first, int rank, gc_dtype dtype, int64_t width) {
    double *values = malloc((size_t)(n ? n : 1) * sizeof *values);
    REQUIRE(values);
    for (int64_t i = 0; i < n; i++) values[i] = value_of(first + i, rank, dtype);
    gc_tensor *f64 = width ? gc_from_host(values, GC_SHAPE(n / width, width), GC_F64, gc_cpu())
                           : gc_from_host(values, GC_SHAPE(n), GC_F64, gc_cpu());
    gc_tensor *t = gc_cast(f64, dtype);
    REQUIRE(t);
    RELEASE(f64);
    free(values);
    return t;
}

/* The reference: every rank's input combined in rank order with the documented arithmetic. */
static gc_tensor *reference_of(int64_t n, int world, gc_dtype dtype, gc_dist_op op) {
    gc_tensor *acc = values_of(n, 0, 0, dtype, 0);
    for (int r = 1; r < world; r++) {
        gc_tensor *next = values_of(n, 0, r, dtype, 0);
        gc_host_reduce(dtype, op, gc_data(acc), gc_data(next), (size_t)n);
        RELEASE(next);
    }
    if (op == GC_DIST_AVG) gc_host_divide(dtype, gc_data(acc), (size_t)n, world);
    return acc;
}

/* a (on any device) holds the bytes of b (on the CPU), from b's element `offset` on. */
static bool holds(const gc_tensor *a, const gc_tensor *b, size_t offset) {
    gc_tensor *host = moved(gc_clone(a), gc_cpu());
    bool same = gc_nbytes(host) + offset * gc_dtype_size(b->dtype) <= gc_nbytes(b) &&
                memcmp(gc_data(host), (const char *)gc_data(b) + offset * gc_dtype_size(b->dtype), gc_nbytes(host)) == 0;
    RELEASE(host);
    return same;
}

/* Every rank holds the same bytes: the element-wise max and min over ranks equal one's own. */
static bool same_on_every_rank(gc_process_group *group, const gc_tensor *t) {
    gc_tensor *host = moved(gc_clone(t), gc_cpu()), *high = gc_clone(t), *low = gc_clone(t);
    REQUIRE(high && low);
    bool same = gc_dist_all_reduce(group, high, GC_DIST_MAX) == GC_OK &&
                gc_dist_all_reduce(group, low, GC_DIST_MIN) == GC_OK && holds(high, host, 0) && holds(low, host, 0);
    RELEASE(host, high, low);
    return same;
}

static void check_all_reduce(gc_process_group *group, gc_device device, int64_t n) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
            if (dtypes[d] == GC_I32 && ops[o] == GC_DIST_AVG) continue;
            gc_tensor *t = moved(values_of(n, 0, rank, dtypes[d], 0), device);
            gc_tensor *want = reference_of(n, world, dtypes[d], ops[o]);
            CHECK_MSG(gc_dist_all_reduce(group, t, ops[o]) == GC_OK, "%s", gc_last_error());
            CHECK_MSG(holds(t, want, 0), "all_reduce of %lld %s, op %d, world %d: not the sequential result",
                      (long long)n, gc_dtype_name(dtypes[d]), (int)ops[o], world);
            RELEASE(t, want);
        }
}

/* f32 values whose sums round: the group may add in another order than 0, 1, ... (the ring
 * adds chunk c in the order c+1, c+2, ..., c); each of the W-1 additions rounds once, so the
 * sums differ by at most (W-1) * 2^-24 * sum of |x| per element. Every rank must still hold
 * the same bytes. Returns the result (on the CPU) for comparisons between backends. */
static gc_tensor *check_rounding_sums(gc_process_group *group, gc_device device) {
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
    gc_tensor *t = moved(gc_from_host(mine, GC_SHAPE(n), GC_F32, gc_cpu()), device);
    CHECK(gc_dist_all_reduce(group, t, GC_DIST_SUM) == GC_OK);
    CHECK(same_on_every_rank(group, t));
    gc_tensor *host = moved(t, gc_cpu());
    const float *got = gc_data(host);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += fabs(got[i] - sum[i]) > world * ldexp(1, -24) * magnitude[i];
    CHECK_MSG(bad == 0, "%lld of %lld sums beyond the rounding bound", (long long)bad, (long long)n);
    free(mine);
    free(sum);
    free(magnitude);
    return host;
}

static void check_reduce_scatter(gc_process_group *group, gc_device device, const int64_t *counts, int64_t total) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t mine = counts ? counts[rank] : total / world + (rank < total % world), start = 0;
    for (int r = 0; r < rank; r++) start += counts ? counts[r] : total / world + (r < total % world);
    gc_tensor *input = moved(values_of(total * 3, 0, rank, GC_F32, 3), device);
    gc_tensor *output = moved(gc_empty(GC_SHAPE(mine, 3), GC_F32, gc_cpu()), device);
    gc_tensor *want = reference_of(total * 3, world, GC_F32, GC_DIST_SUM);
    CHECK_MSG(gc_dist_reduce_scatter(group, input, output, counts, GC_DIST_SUM) == GC_OK, "%s", gc_last_error());
    CHECK_MSG(holds(output, want, (size_t)start * 3), "reduce_scatter of %lld rows: rank %d's rows differ",
              (long long)total, rank);
    RELEASE(input, output, want);
}

static void check_all_gather(gc_process_group *group, gc_device device, const int64_t *counts) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t total = 0, start = 0;
    for (int r = 0; r < world; r++) total += counts[r];
    for (int r = 0; r < rank; r++) start += counts[r];
    gc_tensor *input = moved(values_of(counts[rank] * 3, start * 3, rank, GC_F32, 3), device);
    gc_tensor *output = moved(gc_empty(GC_SHAPE(total, 3), GC_F32, gc_cpu()), device);
    CHECK_MSG(gc_dist_work_wait(gc_dist_all_gather_start(group, input, output, counts)) == GC_OK, "%s",
              gc_last_error());
    int64_t exchanged[DIST_SPAWN_MAX];
    gc_tensor *gathered = gc_dist_all_gather(group, input, exchanged), *host = moved(gc_clone(output), gc_cpu());
    CHECK(gathered && holds(gathered, host, 0));
    /* row block r holds rank r's values */
    int64_t row = 0;
    for (int r = 0; r < world; r++) {
        CHECK(exchanged[r] == counts[r]);
        gc_tensor *theirs = values_of(counts[r] * 3, row * 3, r, GC_F32, 3);
        CHECK_MSG(counts[r] == 0 || memcmp((float *)gc_data(host) + row * 3, gc_data(theirs), (size_t)counts[r] * 12) == 0,
                  "all_gather: rank %d's rows differ on rank %d", r, rank);
        row += counts[r];
        RELEASE(theirs);
    }
    RELEASE(input, output, gathered, host);
}

static void check_broadcast(gc_process_group *group, gc_device device) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    for (int root = 0; root < world; root++) {
        gc_tensor *t = moved(values_of(300001, 0, rank, GC_F32, 0), device), *want = values_of(300001, 0, root, GC_F32, 0);
        CHECK_MSG(gc_dist_broadcast(group, t, root) == GC_OK, "%s", gc_last_error());
        CHECK_MSG(holds(t, want, 0), "broadcast from %d: rank %d differs", root, rank);
        RELEASE(t, want);
    }
}

/* In place: a reduce-scatter whose output is its input's own rows (the ring reduces into the
 * caller's buffer, no copy of it), and an all-gather whose input is its output's own rows,
 * give what the out-of-place forms give. */
static void check_in_place(gc_process_group *group, gc_device device, int64_t total) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t start = 0, counts[DIST_SPAWN_MAX];
    for (int r = 0; r < world; r++) counts[r] = total / world + (r < total % world);
    for (int r = 0; r < rank; r++) start += counts[r];
    gc_tensor *buffer = moved(values_of(total, 0, rank, GC_F32, 0), device);
    gc_tensor *mine = gc_slice0(buffer, start, start + counts[rank]);
    gc_tensor *want = reference_of(total, world, GC_F32, GC_DIST_SUM);
    CHECK_MSG(gc_dist_reduce_scatter(group, buffer, mine, counts, GC_DIST_SUM) == GC_OK, "%s", gc_last_error());
    CHECK_MSG(holds(mine, want, (size_t)start), "in-place reduce_scatter of %lld: rank %d's rows differ",
              (long long)total, rank);
    /* every rank's reduced rows gathered back into place: the whole sum, everywhere */
    CHECK_MSG(gc_dist_work_wait(gc_dist_all_gather_start(group, mine, buffer, counts)) == GC_OK, "%s",
              gc_last_error());
    CHECK_MSG(holds(buffer, want, 0), "in-place all_gather of %lld: rank %d's buffer differs", (long long)total, rank);
    RELEASE(buffer, mine, want);
}

/* Five works in flight at once, waited newest first: they still complete in order. */
static void check_async(gc_process_group *group, gc_device device) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    gc_tensor *t[5], *want[5];
    gc_dist_work *work[5];
    for (int i = 0; i < 5; i++) {
        t[i] = moved(values_of(1000 * (i + 1), 0, rank, GC_F32, 0), device);
        want[i] = reference_of(1000 * (i + 1), world, GC_F32, GC_DIST_SUM);
        work[i] = gc_dist_all_reduce_start(group, t[i], GC_DIST_SUM);
    }
    for (int i = 4; i >= 0; i--) CHECK(gc_dist_work_wait(work[i]) == GC_OK);
    for (int i = 0; i < 5; i++) {
        CHECK(holds(t[i], want[i], 0));
        RELEASE(t[i], want[i]);
    }
}

/* Rank r sends 2r rows of 3 (rank 0 none: sizes differ per rank) and receives rank r-1's;
 * then 1,000,003 values in f64, with the next shift started before waiting for it (the
 * ring's steps overlap that way). The bytes moved and sent count in the group's statistics. */
static void check_shift(gc_process_group *group, gc_device device) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group), prev = (rank + world - 1) % world;
    gc_dist_stats before = gc_dist_get_stats(group);
    gc_tensor *mine = moved(values_of(2 * rank * 3, 0, rank, GC_F32, 3), device);
    gc_tensor *got = moved(gc_empty(GC_SHAPE(2 * prev, 3), GC_F32, gc_cpu()), device);
    gc_tensor *want = values_of(2 * prev * 3, 0, prev, GC_F32, 3);
    CHECK_MSG(gc_dist_shift(group, mine, got) == GC_OK, "%s", gc_last_error());
    CHECK_MSG(holds(got, want, 0), "shift: rank %d did not get rank %d's %d rows", rank, prev, 2 * prev);
    const int64_t n = 1000003;
    gc_tensor *big = moved(values_of(n, 0, rank, GC_F64, 0), device), *big_want = values_of(n, 0, prev, GC_F64, 0);
    gc_tensor *big_got = moved(gc_empty(GC_SHAPE(n), GC_F64, gc_cpu()), device);
    gc_tensor *again = moved(gc_empty(GC_SHAPE(n), GC_F64, gc_cpu()), device);
    gc_dist_work *first = gc_dist_shift_start(group, big, big_got), *second = gc_dist_shift_start(group, big, again);
    CHECK(gc_dist_work_wait(first) == GC_OK && gc_dist_work_wait(second) == GC_OK);
    CHECK_MSG(holds(big_got, big_want, 0) && holds(again, big_want, 0), "shift of %lld f64: rank %d differs",
              (long long)n, rank);
    gc_dist_stats after = gc_dist_get_stats(group);
    CHECK(after.collectives - before.collectives == 3);
    CHECK_MSG(after.bytes - before.bytes == (int64_t)(gc_nbytes(mine) + 2 * gc_nbytes(big)),
              "shift: %lld bytes counted", (long long)(after.bytes - before.bytes));
    int64_t sent = after.sent_bytes - before.sent_bytes; /* each payload once to the next rank */
    CHECK_MSG(sent == (world > 1 ? (int64_t)(gc_nbytes(mine) + 2 * gc_nbytes(big)) : 0),
              "shift: rank %d sent %lld bytes", rank, (long long)sent);
    RELEASE(mine, got, want, big, big_want, big_got, again);
}

/* Seven bytes of host memory from every rank (not a multiple of the word), in rank order. */
static void check_all_gather_host(gc_process_group *group) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    char mine[8], all[8 * DIST_SPAWN_MAX];
    snprintf(mine, sizeof mine, "rank%02d", rank % 100);
    CHECK_MSG(gc_dist_all_gather_host(group, mine, 7, all) == GC_OK, "%s", gc_last_error());
    for (int r = 0; r < world; r++) {
        char want[8];
        snprintf(want, sizeof want, "rank%02d", r % 100);
        CHECK_MSG(memcmp(all + 7 * r, want, 7) == 0, "all_gather_host: slot %d holds '%.7s'", r, all + 7 * r);
    }
}

/* Every check above, on tensors of `device`. */
static void check_collectives(gc_process_group *group, gc_device device) {
    int world = gc_dist_world_size(group);
    gc_dist_stats before = gc_dist_get_stats(group);
    int64_t sizes[] = {1, world > 1 ? world - 1 : 1, 7, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) check_all_reduce(group, device, sizes[s]);
    gc_dist_stats after = gc_dist_get_stats(group);
    CHECK(after.collectives - before.collectives == 4 * 19);
    gc_tensor_release(check_rounding_sums(group, device));
    int64_t ascending[DIST_SPAWN_MAX], gather_counts[DIST_SPAWN_MAX], total = 0;
    for (int r = 0; r < world; r++) {
        ascending[r] = r; /* rank 0 gets no row */
        gather_counts[r] = 2 * r + 1;
        total += r;
    }
    check_reduce_scatter(group, device, NULL, 10);
    check_reduce_scatter(group, device, NULL, 100003);
    check_reduce_scatter(group, device, ascending, total);
    check_all_gather(group, device, gather_counts);
    check_all_gather(group, device, ascending);
    check_in_place(group, device, 1);
    check_in_place(group, device, 300007);
    check_broadcast(group, device);
    check_async(group, device);
    check_shift(group, device);
    check_all_gather_host(group);
    CHECK(gc_dist_barrier(group) == GC_OK);
}

#endif
