/* The ring contrastive loss (gc_contrastive_loss_ring) against the all-gather loss (every
 * rank's rows gathered, the tiled loss over them, this rank's rows of its gradients) and
 * against one process (the untiled reference over the whole batch on the CPU), for any
 * backend and device: the value and this rank's rows of both gradients, for every option
 * (dot and cosine, one-sided and symmetric, mean and sum, default targets with hard
 * negatives, explicit targets with shared positives, temperatures down to 1e-3), rows that
 * differ per rank (none on a rank included), tiles smaller than a block, in f64 and f32, and
 * f16 and bf16 seeded with a loss scale. Each call must also send exactly its blocks: the
 * group's byte count after it is the ring's, so nothing of the global batch was gathered.
 *
 * Tolerances (loss_tiled_cases.h derives them): the ring computes each score as the tiled
 * loss does; what differs is the order of the sums -- a row's log-sum-exp is merged over
 * blocks in another order (one rescale per block: N roundings of u, far below the
 * (D + 4) u |s|max the bound allows for the scores themselves), and the loss is summed per
 * rank, then over the ranks in f64. So the tiled loss's bounds hold: F64_TOL in f64, and the
 * f32 bounds (plus one 16-bit rounding for f16 and bf16) both against the all-gather loss and
 * against one process. */
#ifndef GC_TESTS_DIST_RING_LOSS_CHECKS_H
#define GC_TESTS_DIST_RING_LOSS_CHECKS_H

#include "loss_tiled_cases.h"

#define RING_MAX 4

typedef struct ring_case {
    loss_case shape;            /* dim, similarity, temperature, reduction, symmetric, range (counts below) */
    int64_t queries[RING_MAX];  /* per rank */
    int negatives;              /* default targets: passages = queries * (1 + negatives) on each rank */
    bool explicit_targets;      /* ring_targets for the world's batch, over these passages per rank: */
    int64_t passages[RING_MAX];
    int64_t tile;
} ring_case;

/* Explicit targets of `queries` global queries over `passages` global passages: scattered,
 * with queries 0 and 1 sharing a positive. */
static gc_tensor *ring_targets(int64_t queries, int64_t passages) {
    int32_t *t = malloc((size_t)(queries + 1) * sizeof *t);
    REQUIRE(t);
    for (int64_t i = 0; i < queries; i++) t[i] = (int32_t)((5 * i + 2) % passages);
    if (queries > 1) t[1] = t[0];
    gc_tensor *targets = gc_from_host(t, GC_SHAPE(queries), GC_I32, gc_cpu());
    REQUIRE(targets);
    free(t);
    return targets;
}

/* The bytes one ring call sends from `rank` (what gc_dist_get_stats counts): its shape (eleven
 * 8-byte numbers), the agreement (4), N - 1 blocks (rows, then their scale forward and their
 * scale, weights and lse' backward) each way, the column sums at every forward step
 * (symmetric), the value (8), and N block gradients. */
static int64_t ring_bytes(const int64_t *passages, int world, int rank, int64_t dim, bool symmetric, size_t element) {
    int vectors = symmetric ? 3 : 1;
    int64_t bytes = 88 + 4 + 8;
    for (int t = 0; t < world; t++) {
        int64_t n = passages[((rank - t) % world + world) % world];
        if (t < world - 1) bytes += (int64_t)element * n * (2 * dim + 1 + vectors);
        if (symmetric) bytes += (int64_t)element * 2 * n;
        bytes += (int64_t)element * n * dim; /* handed on at step t + 1, or at the end */
    }
    return bytes;
}

/* Rows [start, start + n) of x into *part; returns max |x| over all of x, the floor of a
 * relative error of the part (the bounds are relative to the whole gradient's largest element). */
static double part_and_largest(const gc_tensor *x, int64_t start, int64_t n, gc_tensor **part) {
    *part = gc_slice0(x, start, start + n);
    REQUIRE(*part);
    return gc_test_largest_abs(x);
}

/* The ring's value and this rank's gradient rows against `want` (the value and the whole
 * batch's gradients, on any device). */
static void ring_expect(const char *what, const ring_case *c, const loss_case *shape, gc_dtype dtype,
                        const result *got, const result *want, const int64_t *starts, const int64_t *counts) {
    bool f64 = dtype == GC_F64;
    double value_tol = f64 ? F64_TOL * fmax(fabs(want->value), 1.0) : f32_value_tolerance(shape);
    double grad_tol = f64 ? F64_TOL : f32_gradient_tolerance(shape) + sixteen_bit_ulp(dtype);
    CHECK_MSG(fabs(got->value - want->value) <= value_tol || (isnan(got->value) && isnan(want->value)),
              "%s, %s, %s: loss %.17g, %s %.17g", shape->name, gc_dtype_name(dtype), what, got->value, what,
              want->value);
    for (int s = 0; s < 2; s++) {
        gc_tensor *part, *mine = on(got->grads[s], gc_cpu());
        double floor = part_and_largest(want->grads[s], starts[s], counts[s], &part);
        double error = relative_difference(mine, part, fmax(floor, 1e-30));
        CHECK_MSG(error <= grad_tol, "%s, %s, tile %lld: d loss / d %s off the %s by %.3g (> %.3g)", shape->name,
                  gc_dtype_name(dtype), (long long)c->tile, s ? "passages" : "queries", what, error, grad_tol);
        RELEASE(part, mine);
    }
}

/* The all-gather loss on `device`: every rank's rows gathered, the tiled loss over them; its
 * gradients moved to the CPU. */
static result ring_gathered(gc_process_group *group, const gc_tensor *q, const gc_tensor *p,
                            const gc_contrastive_options *options, double seed) {
    gc_tensor *all_q = gc_dist_all_gather(group, q, NULL), *all_p = gc_dist_all_gather(group, p, NULL);
    REQUIRE(all_q && all_p);
    result r = {0};
    REQUIRE(gc_contrastive_loss_tiled(all_q, all_p, options, seed, &r.value, &r.grads[0], &r.grads[1]) == GC_OK);
    for (int s = 0; s < 2; s++) {
        gc_tensor *there = r.grads[s];
        r.grads[s] = on(there, gc_cpu());
        gc_tensor_release(there);
    }
    RELEASE(all_q, all_p);
    return r;
}

/* One case in one dtype on `device`, seeded with `seed`. */
static void ring_compare(gc_process_group *group, const ring_case *c, gc_dtype dtype, double seed,
                         gc_device device) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t passages[RING_MAX];
    for (int r = 0; r < world; r++)
        passages[r] = c->explicit_targets ? c->passages[r] : c->queries[r] * (1 + c->negatives);
    loss_case shape = c->shape;
    shape.n_queries = gc_test_sum_counts(c->queries, world);
    shape.n_passages = gc_test_sum_counts(passages, world);
    int64_t starts[2] = {gc_test_sum_counts(c->queries, rank), gc_test_sum_counts(passages, rank)};
    int64_t counts[2] = {c->queries[rank], passages[rank]};
    /* the global batch, the same on every rank */
    gc_tensor *q = gc_test_random_in(GC_SHAPE(shape.n_queries, shape.dim), dtype, -shape.range, shape.range, 300);
    gc_tensor *p = gc_test_random_in(GC_SHAPE(shape.n_passages, shape.dim), dtype, -shape.range, shape.range, 301);
    gc_tensor *targets = c->explicit_targets ? ring_targets(shape.n_queries, shape.n_passages) : NULL;
    gc_tensor *q_part = gc_slice0(q, starts[0], starts[0] + counts[0]);
    gc_tensor *p_part = gc_slice0(p, starts[1], starts[1] + counts[1]);
    gc_tensor *my_q = on(q_part, device), *my_p = on(p_part, device), *targets_there = on(targets, device);
    gc_contrastive_options options = options_of(&shape, targets_there, GC_CONTRASTIVE_TILED, c->tile);

    gc_dist_stats before = gc_dist_get_stats(group);
    result got = {0};
    gc_status status =
        gc_contrastive_loss_ring(group, my_q, my_p, &options, seed, &got.value, &got.grads[0], &got.grads[1]);
    REQUIRE(status == GC_OK);
    int64_t sent = gc_dist_get_stats(group).bytes - before.bytes;
    size_t element = gc_dtype_size(gc_working_dtype(dtype));
    int64_t want_sent = ring_bytes(passages, world, rank, shape.dim, shape.symmetric, element);
    CHECK_MSG(sent == want_sent, "%s, %s: rank %d sent %lld bytes, the ring's blocks are %lld", shape.name,
              gc_dtype_name(dtype), rank, (long long)sent, (long long)want_sent);
    for (int s = 0; s < 2; s++)
        CHECK(got.grads[s] && got.grads[s]->dtype == dtype && got.grads[s]->shape[0] == counts[s]);

    result gathered = ring_gathered(group, my_q, my_p, &options, seed);
    ring_expect("all-gather loss", c, &shape, dtype, &got, &gathered, starts, counts);
    /* one process: the untiled reference, in f32 for 16-bit inputs (what both losses compute in) */
    gc_tensor *q_ref = gc_to_working(q), *p_ref = gc_to_working(p);
    gc_contrastive_options full = options_of(&shape, targets, GC_CONTRASTIVE_FULL, 0);
    result reference = {0};
    REQUIRE(gc_contrastive_value_and_grad(q_ref, p_ref, &full, seed, &reference.value, &reference.grads[0],
                                          &reference.grads[1]) == GC_OK);
    ring_expect("one process", c, &shape, dtype, &got, &reference, starts, counts);
    release_result(&got);
    release_result(&gathered);
    release_result(&reference);
    RELEASE(q, p, targets, q_part, p_part, my_q, my_p, targets_there, q_ref, p_ref);
}

/* Every case in a world of up to RING_MAX ranks (each uses the first `world` counts). */
static void check_ring_loss(gc_process_group *group, gc_device device) {
    const ring_case cases[] = {
        {{"dot, in-batch, equal rows", 0, 0, 5, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_MEAN, false, 1},
         {3, 3, 3, 3}, 0, false, {0}, 0},
        {{"cosine, symmetric, unequal rows, one rank without", 0, 0, 4, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_SUM,
          true, 1},
         {2, 5, 0, 3}, 0, false, {0}, 2},
        {{"cosine, symmetric, 2 hard negatives", 0, 0, 3, NULL, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_MEAN, true, 1},
         {3, 1, 4, 2}, 2, false, {0}, 3},
        {{"dot, one-sided, 1 hard negative, sum", 0, 0, 4, NULL, GC_SIMILARITY_DOT, 0.3, GC_LOSS_SUM, false, 1},
         {1, 4, 2, 2}, 1, false, {0}, 0},
        {{"dot, symmetric, explicit targets, shared positive", 0, 0, 4, NULL, GC_SIMILARITY_DOT, 0.3, GC_LOSS_MEAN,
          true, 1},
         {2, 3, 1, 2}, 0, true, {4, 2, 5, 3}, 2},
        /* scores up to 8 * 5^2 / 1e-3 = 2e5: the running max across blocks keeps exp finite */
        {{"dot, symmetric, temperature 1e-3, large scores", 0, 0, 8, NULL, GC_SIMILARITY_DOT, 1e-3, GC_LOSS_MEAN,
          true, 5},
         {2, 2, 3, 1}, 0, false, {0}, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ring_compare(group, &cases[k], GC_F64, 1, device);
        ring_compare(group, &cases[k], GC_F32, 1, device);
    }
    /* 16-bit inputs seeded with a loss scale, applied in f32 before the rounding */
    for (size_t k = 1; k < 3; k++) {
        ring_compare(group, &cases[k], GC_F16, 1024, device);
        ring_compare(group, &cases[k], GC_BF16, 1024, device);
    }
}

#endif
