/* The ring contrastive loss over the TCP ring on the CPU, in worlds of 1 to 4 processes
 * forked by this test: equal to the all-gather loss and to one process for every option
 * (dist_ring_loss_checks.h), its working memory at 4 x 2048 rows bounded by its blocks (never
 * the global batch), ranks that call with other options refused with an error naming both, and
 * a hostile peer's counts and dtype refused with an error naming it, never a stop. */
#include "dist_ring_loss_checks.h"
#include "dist_spawn.h"

static int equal_body(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    gc_process_group *group = dist_test_group(60);
    check_ring_loss(group, gc_cpu());
    gc_process_group_free(group);
    return gc_test_result();
}

/* 2048 rows a side on each of 4 ranks, width 64, cosine and symmetric: what the loss
 * allocates beyond its inputs, at its peak, is its queries' gradient, two blocks and two
 * block gradients in flight (its passages' gradient arrives in one of them), one tile of
 * scores (512^2) and a few numbers per row: 5 n D + 32 n floats (n rows of this rank's, D
 * wide) plus the tile; less than the all-gather loss's floor, the gathered rows and their
 * gradients, 4 (4 n) D floats. */
static int memory_body(int rank, int world, void *arg) {
    (void)rank, (void)arg;
    const int64_t n = 2048, dim = 64;
    gc_process_group *group = dist_test_group(60);
    gc_tensor *q = gc_test_random(GC_SHAPE(n, dim), GC_F32, 10 + (uint64_t)rank);
    gc_tensor *p = gc_test_random(GC_SHAPE(n, dim), GC_F32, 20 + (uint64_t)rank);
    REQUIRE(q && p);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05, .symmetric = true};
    size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_memory_reset_peak(gc_cpu());
    double value;
    gc_tensor *gq = NULL, *gp = NULL;
    REQUIRE(gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp) == GC_OK);
    size_t working = gc_memory_get_stats(gc_cpu()).peak_bytes - live;
    size_t bound = (size_t)(5 * n * dim + 32 * n) * sizeof(float) +
                   (size_t)GC_CONTRASTIVE_TILE_CPU * GC_CONTRASTIVE_TILE_CPU * sizeof(float);
    size_t gathered = 4 * (size_t)(world * n * dim) * sizeof(float);
    fprintf(stderr, "rank %d: the ring loss allocates %zu bytes (bound %zu; the all-gather loss at least %zu)\n", rank,
            working, bound, gathered);
    CHECK_MSG(working <= bound && working < gathered,
              "rank %d: the ring loss allocates %zu bytes, more than its blocks' %zu (or the gathered %zu)", rank,
              working, bound, gathered);
    RELEASE(q, p, gq, gp);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1 calls with another temperature: every rank returns an error naming both calls. */
static int disagreeing_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(20);
    gc_tensor *q = gc_test_random(GC_SHAPE(2, 3), GC_F32, 1), *p = gc_test_random(GC_SHAPE(2, 3), GC_F32, 2);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = rank ? 0.5 : 0.1};
    double value;
    gc_tensor *gq, *gp;
    CHECK(gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp) == GC_ERR_FORMAT && !gq && !gp);
    const char *said = gc_last_error();
    CHECK_MSG(strstr(said, "contrastive_loss_ring: rank") && strstr(said, "temperature 0.1") &&
                  strstr(said, "temperature 0.5"),
              "rank %d said: %s", rank, said);
    RELEASE(q, p);
    gc_process_group_free(group);
    return gc_test_result();
}

/* What a rank of the ring loss sends first (contrastive_ring.c's rank_shape), as a hostile
 * peer crafts it: rank 0's call below, with one value changed. */
typedef struct sent_shape {
    int64_t queries, passages, dim, dtype, similarity, reduction, symmetric, targets_given, guide_dim, positives;
    double temperature;
} sent_shape;

typedef struct hostile_case {
    sent_shape sent; /* what rank 1 sends */
    const char *said; /* what rank 0's error must say */
    bool targets;     /* rank 0 gives the targets 0, 1, 2, 3 (for its 2 queries and rank 1's 2) */
} hostile_case;

/* Rank 1 sends crafted bytes in place of calling the loss; rank 0 returns an error naming
 * rank 1 and the value, and does not stop. */
static int hostile_body(int rank, int world, void *arg) {
    (void)world;
    const hostile_case *c = arg;
    gc_process_group *group = dist_test_group(20);
    if (rank == 1) {
        sent_shape all[2];
        CHECK(gc_dist_all_gather_host(group, &c->sent, sizeof c->sent, all) == GC_OK);
    } else {
        gc_tensor *q = gc_test_random(GC_SHAPE(2, 3), GC_F32, 1), *p = gc_test_random(GC_SHAPE(2, 3), GC_F32, 2);
        gc_tensor *targets = c->targets ? gc_arange(4, 0, 1, GC_I32, gc_cpu()) : NULL;
        gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.1, .targets = targets};
        double value;
        gc_tensor *gq, *gp;
        CHECK(gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp) == GC_ERR_FORMAT && !gq && !gp);
        CHECK_MSG(strstr(gc_last_error(), c->said) != NULL, "wanted '%s' in '%s'", c->said, gc_last_error());
        RELEASE(q, p);
        gc_tensor_release(targets);
    }
    gc_process_group_free(group);
    return gc_test_result();
}

static void check_hostile_peers(void) {
    const sent_shape honest = {.queries = 2, .passages = 2, .dim = 3, .dtype = GC_F32, .similarity = GC_SIMILARITY_DOT,
                               .positives = 1, .temperature = 0.1};
    hostile_case cases[] = {
        {honest, "rank 1 with D 3, an unknown dtype -1118111650", false}, /* the flipped bits */
        {honest, "rank 1 has -5 queries", false},
        {honest, "rank 1 has 2 queries and 9223372036854775807 passages", false},
        {honest, "the ranks' 5 passages together are not a multiple of their 4 queries", false},
        /* the targets fit rank 0's view of the batch (4 passages), not rank 1's count: an
         * error, not a stop as for a caller's target out of range */
        {honest, "a target is passage 3, but the ranks' passages together are 3", true},
    };
    cases[0].sent.dtype = -1118111650;
    cases[1].sent.queries = -5;
    cases[2].sent.passages = INT64_MAX;
    cases[3].sent.passages = 3;
    cases[4].sent.passages = 1;
    cases[4].sent.targets_given = 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK_MSG(dist_all_pass(2, hostile_body, &cases[i], 60), "a hostile peer: %s", cases[i].said);
}

int main(void) {
    for (int world = 1; world <= 4; world++)
        CHECK_MSG(dist_all_pass(world, equal_body, NULL, 240), "the ring loss, world %d", world);
    CHECK_MSG(dist_all_pass(4, memory_body, NULL, 240), "the ring loss's memory, world 4");
    CHECK_MSG(dist_all_pass(2, disagreeing_body, NULL, 60), "ranks that call with other options");
    check_hostile_peers();
    return gc_test_result();
}
