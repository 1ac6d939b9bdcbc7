/* The ring loss with several positives per query and with Matryoshka prefixes, over the TCP
 * ring on the CPU in worlds of 2 and 3 processes forked by this test (rows that differ per
 * rank): the value and this rank's rows of both gradients equal the loss over the gathered
 * batch -- every rank's rows gathered in rank order, the untiled reference differentiated by
 * autograd -- in f64 to 1e-10 (relative to the largest gradient element): the ring sums the
 * same terms in another order (a log-sum-exp merged per block, the loss summed per rank), a
 * few f64 roundings, nowhere near 1e-10; a wrong positive or a missing prefix is off by
 * O(1e-2) or more. Cases: k = 2 and 3 under the default targets (each query followed by its
 * k positives, then hard negatives), explicit targets [global Nq, k] with a positive shared by
 * two queries, cosine and dot, one-sided and symmetric; Matryoshka (three prefixes, weighted)
 * over the one-positive and the two-positive loss. Ranks that disagree on k get an error. */
#include "dist_spawn.h"

#define TOLERANCE 1e-10
#define MAX_WORLD 3

typedef struct positives_case {
    const char *name;
    int64_t queries[MAX_WORLD];   /* per rank */
    int64_t positives, negatives; /* per query: passages = queries * (positives + negatives) per rank */
    bool explicit_targets;        /* scattered [global Nq, k] targets instead of the default */
    gc_similarity similarity;
    bool symmetric;
    int prefixes;                 /* Matryoshka: 0 none, else 3 prefixes of D 8: 8, 5, 2 */
} positives_case;

#define DIM 8

/* [rows, DIM] f64 rows, the same on every rank for a given seed. */
static gc_tensor *random_rows(int64_t rows, uint64_t seed) {
    return gc_test_random(GC_SHAPE(rows, DIM), GC_F64, seed);
}

/* Explicit targets [nq, k] over np passages: scattered, queries 0 and 1 sharing a positive. */
static gc_tensor *scattered_targets(int64_t nq, int64_t k, int64_t np) {
    int32_t *t = malloc((size_t)(nq * k) * sizeof *t);
    REQUIRE(t);
    for (int64_t i = 0; i < nq * k; i++) t[i] = (int32_t)((7 * i + 3) % np);
    if (nq > 1) t[k] = t[0];
    gc_tensor *targets = gc_from_host(t, GC_SHAPE(nq, k), GC_I32, gc_cpu());
    REQUIRE(targets);
    free(t);
    return targets;
}

static int64_t sum_before(const int64_t *counts, int rank) {
    int64_t sum = 0;
    for (int r = 0; r < rank; r++) sum += counts[r];
    return sum;
}

static int compare_body(int rank, int world, void *arg) {
    const positives_case *c = arg;
    gc_process_group *group = dist_test_group(60);
    int64_t per_query = c->positives + c->negatives, queries[MAX_WORLD], passages[MAX_WORLD];
    for (int r = 0; r < world; r++) queries[r] = c->queries[r], passages[r] = c->queries[r] * per_query;
    int64_t total_queries = sum_before(queries, world), total_passages = sum_before(passages, world);
    /* every rank makes the global batch (the same seeds) and takes its rows of it */
    gc_tensor *all_q = random_rows(total_queries, 11), *all_p = random_rows(total_passages, 12);
    gc_tensor *q = gc_slice0(all_q, sum_before(queries, rank), sum_before(queries, rank + 1));
    gc_tensor *p = gc_slice0(all_p, sum_before(passages, rank), sum_before(passages, rank + 1));
    gc_tensor *targets = c->explicit_targets ? scattered_targets(total_queries, c->positives, total_passages) : NULL;
    REQUIRE(all_q && all_p && q && p);
    gc_contrastive_options options = {.similarity = c->similarity, .temperature = 0.1, .symmetric = c->symmetric,
                                      .targets = targets, .positives = c->positives};
    gc_matryoshka_options matryoshka = {.base = gc_contrastive_loss_fn(&options), .count = 3,
                                        .dims = {8, 5, 2}, .weights = {1, 0.5, 0.25}};
    gc_loss_fn loss = c->prefixes ? gc_matryoshka_loss_fn(&matryoshka) : gc_contrastive_loss_fn(&options);
    /* the reference: the loss's forward over the gathered batch (the untiled loss for each
     * positive and prefix), differentiated by autograd */
    gc_tensor *leaves[2] = {gc_detach(all_q), gc_detach(all_p)}, *mine[2] = {q, p};
    gc_tensor *want[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
    for (int s = 0; s < 2; s++) gc_set_requires_grad(leaves[s], true);
    gc_tensor *reference = loss.forward(leaves, 2, loss.args);
    REQUIRE(reference && gc_backward(&reference, NULL, 1) == GC_OK);
    double want_value = gc_item(reference), got_value = NAN;
    for (int s = 0; s < 2; s++) want[s] = gc_tensor_retain((gc_tensor *)gc_grad(leaves[s]));
    RELEASE(reference, leaves[0], leaves[1]);
    gc_status status = loss.group_value_and_grad(group, mine, 2, loss.args, 1, &got_value, got);
    CHECK_MSG(status == GC_OK, "%s, rank %d: %s", c->name, rank, gc_last_error());
    if (status == GC_OK) {
        CHECK_MSG(fabs(got_value - want_value) <= TOLERANCE * fmax(fabs(want_value), 1), "%s: ring %.17g, gathered %.17g",
                  c->name, got_value, want_value);
        int64_t starts[2] = {sum_before(queries, rank), sum_before(passages, rank)};
        int64_t counts[2] = {queries[rank], passages[rank]};
        for (int s = 0; s < 2; s++) {
            /* relative to the whole gradient's largest element, as the ring's own tests measure */
            gc_tensor *rows = gc_slice0(want[s], starts[s], starts[s] + counts[s]);
            gc_tensor *difference = gc_sub(got[s], rows);
            REQUIRE(rows && difference);
            double error = gc_test_largest_abs(difference) / fmax(gc_test_largest_abs(want[s]), 1e-30);
            CHECK_MSG(error <= TOLERANCE, "%s, rank %d: d loss / d %s off by %.3g", c->name, rank,
                      s ? "passages" : "queries", error);
            RELEASE(rows, difference);
        }
    }
    RELEASE(all_q, all_p, q, p, targets, want[0], want[1], got[0], got[1]);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1 asks for 3 positives, rank 0 for 2: both return an error naming both calls. */
static int disagreeing_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(20);
    gc_tensor *q = random_rows(2, 1), *p = random_rows(6, 2);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.1,
                                      .positives = rank ? 3 : 2};
    double value;
    gc_tensor *gq, *gp;
    CHECK(gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp) == GC_ERR_FORMAT && !gq && !gp);
    CHECK_MSG(strstr(gc_last_error(), "2 positives") && strstr(gc_last_error(), "3 positives"), "rank %d said: %s",
              rank, gc_last_error());
    RELEASE(q, p);
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    const positives_case cases[] = {
        {"2 positives, cosine", {3, 2, 4}, 2, 1, false, GC_SIMILARITY_COSINE, false, 0},
        {"3 positives, dot, symmetric", {2, 3, 1}, 3, 0, false, GC_SIMILARITY_DOT, true, 0},
        {"2 positives, cosine, symmetric, hard negatives", {4, 1, 2}, 2, 2, false, GC_SIMILARITY_COSINE, true, 0},
        {"explicit targets [Nq, 2], symmetric", {3, 3, 2}, 2, 1, true, GC_SIMILARITY_COSINE, true, 0},
        {"matryoshka, 1 positive", {3, 2, 2}, 1, 1, false, GC_SIMILARITY_COSINE, false, 3},
        {"matryoshka, 2 positives, symmetric", {2, 3, 2}, 2, 1, false, GC_SIMILARITY_COSINE, true, 3},
    };
    for (int world = 2; world <= MAX_WORLD; world++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            CHECK_MSG(dist_all_pass(world, compare_body, (void *)&cases[i], 120), "%s, world %d", cases[i].name,
                      world);
    CHECK_MSG(dist_all_pass(2, disagreeing_body, NULL, 60), "ranks that disagree on the positives");
    return gc_test_result();
}
