/* The ring contrastive loss over the TCP ring on the CPU, in worlds of 1 to 4 processes
 * forked by this test: equal to the all-gather loss and to one process for every option
 * (dist_ring_loss_checks.h), its working memory at 4 x 2048 rows bounded by its blocks (never
 * the global batch), and ranks that call with other options stopped, naming both. */
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

/* Rank 1 calls with another temperature: both ranks stop, naming both calls (stderr goes to a
 * file per rank, which the test reads). */
static int disagreeing_body(int rank, int world, void *arg) {
    (void)world;
    dist_stderr_to_file(arg, rank);
    gc_process_group *group = dist_test_group(20);
    gc_tensor *q = gc_test_random(GC_SHAPE(2, 3), GC_F32, 1), *p = gc_test_random(GC_SHAPE(2, 3), GC_F32, 2);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = rank ? 0.5 : 0.1};
    double value;
    gc_tensor *gq, *gp;
    gc_contrastive_loss_ring(group, q, p, &options, 1, &value, &gq, &gp);
    return 0; /* not reached */
}

static void check_disagreement(void) {
    char base[] = "/tmp/gc_ring_disagreeXXXXXX";
    dist_stderr_base(base);
    int status[2];
    double elapsed;
    CHECK(dist_run(2, NULL, 0, disagreeing_body, base, 60, status, &elapsed));
    for (int rank = 0; rank < 2; rank++) {
        char text[1024];
        dist_read_stderr(base, rank, text, sizeof text);
        CHECK_MSG(status[rank] == 128 + SIGABRT, "rank %d exited with %d", rank, status[rank]);
        CHECK_MSG(strstr(text, "contrastive_loss_ring: rank") && strstr(text, "temperature 0.1") &&
                      strstr(text, "temperature 0.5"),
                  "rank %d said: %s", rank, text);
    }
    remove(base);
}

int main(void) {
    for (int world = 1; world <= 4; world++)
        CHECK_MSG(dist_all_pass(world, equal_body, NULL, 240), "the ring loss, world %d", world);
    CHECK_MSG(dist_all_pass(4, memory_body, NULL, 240), "the ring loss's memory, world 4");
    check_disagreement();
    return gc_test_result();
}
