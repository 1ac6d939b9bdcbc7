/* The GIST loss around the ring (gc_gist_loss_ring) over the TCP ring on the CPU, in worlds of
 * 1 to 4 processes forked by this test:
 *   - against the gathered loss -- every rank's rows and guide rows gathered, gc_gist_loss_tiled
 *     over them with the same tile -- and against one process's untiled loss by autograd: the
 *     value and this rank's rows of both gradients, in f64, for dot and cosine, absolute and
 *     relative margins, mean and sum, hard negatives, explicit targets (a positive shared by two
 *     queries), rows that differ per rank (none on a rank included) and tiles smaller than a
 *     block; every case masks some candidates (the loss moves when the guide's margin is lifted
 *     past every score);
 *   - inside GradCache (dist_cache_checks.h), each rank giving its own rows and its own guide
 *     rows to the ring, against one process's GradCache step over the whole batch with the
 *     gathered guide: the parameters' gradients, the loss and the parameters after AdamW;
 *   - a query whose positive is another rank's passage stops the program, naming the check.
 *
 * Tolerance, f64: the ring computes each score and each mask as the tiled loss computes the same
 * tile (the guide's unit rows are the same rows, normalised one by one); what differs is the
 * order of the sums -- a row's log-sum-exp merged over blocks in another order, the loss summed
 * per rank, then over the ranks in f64 -- a few hundred roundings of 2^-53 relative to the
 * largest term: 1e-12 (loss_tiled_cases.h's F64_TOL) against both. A guide score within a
 * rounding of its threshold could fall on either side between the two, as the gathered and
 * the untiled loss already may (gist_mask.c); these draws have none that close. */
#include <signal.h>

#include "dist_cache_checks.h"

#define RING_MAX 4
#define GUIDE_DIM 3 /* the guide's width, not the student's: the two travel side by side */
#define F64_TOL 1e-12

typedef struct gist_case {
    const char *name;
    int64_t queries[RING_MAX];  /* per rank */
    int negatives;              /* default targets: passages = queries * (1 + negatives) on each rank */
    bool explicit_targets;      /* targets among each rank's passages, these many per rank: */
    int64_t passages[RING_MAX];
    gc_similarity similarity;
    double temperature;
    gc_loss_reduction reduction;
    gc_gist_margin strategy;
    double margin;
    int64_t tile;
} gist_case;

/* Explicit targets for the world's batch: each query's positive one of its own rank's passages,
 * scattered, the first two queries of a rank with two or more sharing theirs. */
static gc_tensor *local_targets(const gist_case *c, int world) {
    int64_t total = gc_test_sum_counts(c->queries, world), at = 0;
    int32_t *t = malloc((size_t)(total + 1) * sizeof *t);
    REQUIRE(t);
    for (int r = 0; r < world; r++) {
        int64_t first = gc_test_sum_counts(c->passages, r);
        for (int64_t i = 0; i < c->queries[r]; i++) {
            int64_t like = i == 1 ? 0 : i; /* query 1 shares query 0's positive */
            t[at + i] = (int32_t)(first + (3 * like + 1) % c->passages[r]);
        }
        at += c->queries[r];
    }
    gc_tensor *targets = gc_from_host(t, GC_SHAPE(total), GC_I32, gc_cpu());
    REQUIRE(targets);
    free(t);
    return targets;
}

typedef struct gist_result {
    double value;
    gc_tensor *grads[2];
} gist_result;

static void release_gist_result(gist_result *r) { RELEASE(r->grads[0], r->grads[1]); }

/* max |got - want rows [start, start + count)| over max |want| (the whole gradient's). */
static double rows_error(const gc_tensor *got, const gc_tensor *want, int64_t start, int64_t count) {
    gc_tensor *part = gc_slice0(want, start, start + count);
    gc_tensor *difference = gc_sub(got, part);
    REQUIRE(difference);
    double error = gc_test_largest_abs(difference) / fmax(gc_test_largest_abs(want), 1e-300);
    RELEASE(part, difference);
    return error;
}

static void expect_same(const gist_case *c, const char *what, int world, const gist_result *got,
                        const gist_result *want, const int64_t *starts, const int64_t *counts) {
    CHECK_MSG(fabs(got->value - want->value) <= F64_TOL * fmax(fabs(want->value), 1),
              "%s, world %d: loss %.17g, the %s %.17g", c->name, world, got->value, what, want->value);
    for (int s = 0; s < 2; s++) {
        double error = rows_error(got->grads[s], want->grads[s], starts[s], counts[s]);
        CHECK_MSG(error <= F64_TOL, "%s, world %d: d loss / d %s off the %s by %.3g", c->name, world,
                  s ? "passages" : "queries", what, error);
    }
}

static void check_case(gc_process_group *group, const gist_case *c) {
    int rank = gc_dist_rank(group), world = gc_dist_world_size(group);
    int64_t passages[RING_MAX];
    for (int r = 0; r < world; r++)
        passages[r] = c->explicit_targets ? c->passages[r] : c->queries[r] * (1 + c->negatives);
    int64_t n_queries = gc_test_sum_counts(c->queries, world);
    int64_t n_passages = gc_test_sum_counts(passages, world);
    int64_t starts[2] = {gc_test_sum_counts(c->queries, rank), gc_test_sum_counts(passages, rank)};
    int64_t counts[2] = {c->queries[rank], passages[rank]};
    /* the global batch and the guide's rows of it, the same on every rank */
    gc_tensor *q = gc_test_random_in(GC_SHAPE(n_queries, 4), GC_F64, -1, 1, 300);
    gc_tensor *p = gc_test_random_in(GC_SHAPE(n_passages, 4), GC_F64, -1, 1, 301);
    gc_tensor *gq = gc_test_random_in(GC_SHAPE(n_queries, GUIDE_DIM), GC_F64, -1, 1, 302);
    gc_tensor *gp = gc_test_random_in(GC_SHAPE(n_passages, GUIDE_DIM), GC_F64, -1, 1, 303);
    gc_tensor *targets = c->explicit_targets ? local_targets(c, world) : NULL;
    gc_tensor *mine[4] = {gc_slice0(q, starts[0], starts[0] + counts[0]), gc_slice0(p, starts[1], starts[1] + counts[1]),
                          gc_slice0(gq, starts[0], starts[0] + counts[0]), gc_slice0(gp, starts[1], starts[1] + counts[1])};
    gc_gist_options whole = {.contrastive = {.similarity = c->similarity, .temperature = c->temperature,
                                             .targets = targets, .reduction = c->reduction,
                                             .method = GC_CONTRASTIVE_TILED, .tile_size = c->tile},
                             .guide_queries = gq, .guide_passages = gp, .margin_strategy = c->strategy,
                             .margin = c->margin};
    gc_gist_options own = whole;
    own.guide_queries = mine[2];
    own.guide_passages = mine[3];

    gist_result ring = {0}, tiled = {0}, untiled = {0}, unmasked = {0};
    REQUIRE(gc_gist_loss_ring(group, mine[0], mine[1], &own, 1, &ring.value, &ring.grads[0], &ring.grads[1]) ==
            GC_OK);
    for (int s = 0; s < 2; s++)
        CHECK(ring.grads[s]->dtype == GC_F64 && ring.grads[s]->shape[0] == counts[s]);
    REQUIRE(gc_gist_loss_tiled(q, p, &whole, 1, &tiled.value, &tiled.grads[0], &tiled.grads[1]) == GC_OK);
    expect_same(c, "gathered tiled loss", world, &ring, &tiled, starts, counts);
    gc_gist_options full = whole;
    full.contrastive.method = GC_CONTRASTIVE_FULL;
    REQUIRE(gc_gist_value_and_grad(q, p, &full, 1, &untiled.value, &untiled.grads[0], &untiled.grads[1]) == GC_OK);
    expect_same(c, "untiled loss", world, &ring, &untiled, starts, counts);
    /* the guide masks something: lifting the threshold past every score moves the loss */
    own.margin_strategy = GC_GIST_ABSOLUTE;
    own.margin = -10;
    REQUIRE(gc_gist_loss_ring(group, mine[0], mine[1], &own, 1, &unmasked.value, &unmasked.grads[0],
                              &unmasked.grads[1]) == GC_OK);
    CHECK_MSG(unmasked.value - ring.value > 1e-6 * fabs(unmasked.value), "%s, world %d: the guide masks nothing "
              "(%.17g masked, %.17g not)", c->name, world, ring.value, unmasked.value);
    release_gist_result(&ring);
    release_gist_result(&tiled);
    release_gist_result(&untiled);
    release_gist_result(&unmasked);
    RELEASE(q, p, gq, gp, targets, mine[0], mine[1], mine[2], mine[3]);
}

static int equal_body(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    gc_process_group *group = dist_test_group(60);
    const gist_case cases[] = {
        {"cosine, absolute margin 0.05, equal rows", {3, 3, 3, 3}, 0, false, {0}, GC_SIMILARITY_COSINE, 0.05,
         GC_LOSS_MEAN, GC_GIST_ABSOLUTE, 0.05, 0},
        {"cosine, relative margin 0.1, unequal rows, one rank without, 1 hard negative", {2, 4, 0, 3}, 1, false, {0},
         GC_SIMILARITY_COSINE, 0.1, GC_LOSS_SUM, GC_GIST_RELATIVE, 0.1, 2},
        {"dot, absolute margin 0, 2 hard negatives, tiles of 2", {3, 1, 2, 2}, 2, false, {0}, GC_SIMILARITY_DOT, 0.5,
         GC_LOSS_MEAN, GC_GIST_ABSOLUTE, 0, 2},
        {"cosine, explicit targets, shared positive, tiles of 3", {3, 2, 1, 2}, 0, true, {4, 3, 2, 5},
         GC_SIMILARITY_COSINE, 0.05, GC_LOSS_MEAN, GC_GIST_ABSOLUTE, 0.02, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) check_case(group, &cases[k]);
    gc_process_group_free(group);
    return gc_test_result();
}

/* --- inside GradCache --- */

/* The scenario's global batch's guide rows (of its one step), and the two views of them the
 * loss is given: every rank's, gathered (the one process's reference), and this rank's (the
 * ring's). Set in each forked rank before the step. */
static gc_tensor *guide_queries, *guide_passages;
static gc_gist_options gathered_guide, own_guide;

static gc_tensor *gathered_forward(gc_tensor *const *reps, int count, void *args) {
    (void)count, (void)args;
    return gc_gist_loss(reps[0], reps[1], &gathered_guide);
}

static int cache_body(int rank, int world, void *arg) {
    const dist_scenario *s = arg;
    int64_t total = gc_test_sum_counts(s->counts, world), start = gc_test_sum_counts(s->counts, rank);
    int64_t per_query = 1 + s->negatives;
    own_guide.guide_queries = gc_slice0(guide_queries, start, start + s->counts[rank]);
    own_guide.guide_passages = gc_slice0(guide_passages, start * per_query, (start + s->counts[rank]) * per_query);
    gathered_guide.guide_queries = gc_slice0(guide_queries, 0, total);
    gathered_guide.guide_passages = gc_slice0(guide_passages, 0, total * per_query);
    int failed = dist_cache_body(rank, world, arg);
    RELEASE((gc_tensor *)own_guide.guide_queries, (gc_tensor *)own_guide.guide_passages,
            (gc_tensor *)gathered_guide.guide_queries, (gc_tensor *)gathered_guide.guide_passages);
    return failed;
}

static void check_inside_cache(void) {
    guide_queries = gc_normal(GC_SHAPE(16, GUIDE_DIM), GC_F64, gc_cpu(), 0, 1, 40, 0);
    guide_passages = gc_normal(GC_SHAPE(32, GUIDE_DIM), GC_F64, gc_cpu(), 0, 1, 41, 0);
    REQUIRE(guide_queries && guide_passages);
    /* dist_cache_body's infonce: dot products at temperature 0.5; the guide masks at margin 0.05 */
    own_guide = (gc_gist_options){.contrastive = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                                  .method = GC_CONTRASTIVE_TILED, .tile_size = 3},
                                  .margin = 0.05};
    gathered_guide = own_guide;
    /* the ranks' loss: the library's gc_loss_fn, whose ring takes this rank's guide rows; its
     * forward, which the one process differentiates, the gathered guide's */
    gc_loss_fn loss = gc_gist_loss_fn(&own_guide);
    loss.forward = gathered_forward;
    const dist_scenario scenarios[] = {
        {"f64, GIST around the ring, 1 hard negative, unequal rows", GC_F64, {5, 3}, 1, 2, .backend = GC_DIST_TCP,
         .global_loss = GC_GLOBAL_LOSS_RING, .ring = true, .loss = &loss},
        {"f64, GIST around the ring, tied, unequal rows", GC_F64, {3, 1, 4, 2}, 1, 2, .tied = true,
         .backend = GC_DIST_TCP, .global_loss = GC_GLOBAL_LOSS_RING, .ring = true, .loss = &loss},
    };
    CHECK_MSG(dist_all_pass(2, cache_body, (void *)&scenarios[0], 120), "world 2: %s", scenarios[0].name);
    CHECK_MSG(dist_all_pass(4, cache_body, (void *)&scenarios[1], 120), "world 4: %s", scenarios[1].name);
    RELEASE(guide_queries, guide_passages);
}

/* --- a positive on another rank --- */

/* Rank 0's one query names rank 1's passage as its positive: both ranks stop (rank 1 by the
 * lost peer or the same check), rank 0 naming the check. */
static int remote_positive_body(int rank, int world, void *arg) {
    (void)world;
    dist_stderr_to_file(arg, rank);
    gc_process_group *group = dist_test_group(20);
    gc_tensor *q = gc_test_random(GC_SHAPE(1, 3), GC_F64, 1), *p = gc_test_random(GC_SHAPE(2, 3), GC_F64, 2);
    gc_tensor *gq = gc_test_random(GC_SHAPE(1, 2), GC_F64, 3), *gp = gc_test_random(GC_SHAPE(2, 2), GC_F64, 4);
    gc_tensor *targets = gc_from_host((const int32_t[]){3, 1}, GC_SHAPE(2), GC_I32, gc_cpu());
    gc_gist_options options = {.contrastive = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1,
                                               .targets = targets},
                               .guide_queries = gq, .guide_passages = gp};
    double value;
    gc_tensor *grads[2];
    gc_gist_loss_ring(group, q, p, &options, 1, &value, &grads[0], &grads[1]);
    return 0; /* not reached */
}

static void check_remote_positive(void) {
    char base[] = "/tmp/gc_gist_ring_remoteXXXXXX";
    dist_stderr_base(base);
    int status[2];
    double elapsed;
    CHECK(dist_run(2, NULL, 0, remote_positive_body, base, 60, status, &elapsed));
    char text[1024], other[1024];
    dist_read_stderr(base, 1, other, sizeof other); /* read to remove it: rank 1 may stop either way */
    dist_read_stderr(base, 0, text, sizeof text);
    CHECK_MSG(status[0] == 128 + SIGABRT, "rank 0 exited with %d", status[0]);
    CHECK_MSG(strstr(text, "gist_loss_ring (a query's positive among its own rank's passages): positive 3"),
              "rank 0 said: %s", text);
    remove(base);
}

int main(void) {
    for (int world = 1; world <= 4; world++)
        CHECK_MSG(dist_all_pass(world, equal_body, NULL, 240), "the ring's GIST loss, world %d", world);
    check_inside_cache();
    check_remote_positive();
    return gc_test_result();
}
