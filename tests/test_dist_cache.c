/* Distributed Gradient Cache over the TCP ring, in worlds of 2 and 4 processes forked by
 * this test (dist_cache_checks.h): equal and unequal rows per rank, hard negatives, tied
 * encoders, the kept last graph, the plain (full-batch) step, sync suppressed or not; the
 * loss gathered or around the ring, and the automatic choice between them; a peer's row
 * counts checked before they size anything. */
#include "dist_cache_checks.h"

/* What each rank of a Gradient Cache step sends before the gather (distributed.c's rank_rows),
 * as a hostile peer crafts it: -3 query rows. */
typedef struct sent_rows {
    int64_t rows[GC_CACHE_MAX_MODELS];
    double limit;
} sent_rows;

/* Rank 1 sends crafted bytes in place of its step; rank 0's step returns an error naming
 * rank 1 and the count, and does not stop. */
static int hostile_rows_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(20);
    if (rank == 1) {
        sent_rows mine = {.rows = {-3, 2}}, all[2];
        CHECK(gc_dist_all_gather_host(group, &mine, sizeof mine, all) == GC_OK);
    } else {
        mlp_encoder e = make_encoder(GC_F32, 1, 0);
        gc_cache_config config = {.n_models = 2,
                                  .models = {{&e, encoder_forward, 2, &e.params}, {&e, encoder_forward, 2, &e.params}},
                                  .loss = {.forward = infonce},
                                  .group = group};
        gc_tensor *x = gc_ones(GC_SHAPE(2, IN), GC_F32, gc_cpu());
        gc_batch inputs[2] = {{1, {"x"}, {x}}, {1, {"x"}, {x}}};
        gc_cache *cache = gc_cache_new(&config);
        double loss;
        CHECK(gc_cache_step(cache, inputs, &loss, NULL) == GC_ERR_FORMAT);
        CHECK_MSG(strstr(gc_last_error(), "cache: rank 1 says it has -3 rows of model 0") != NULL, "said: %s",
                  gc_last_error());
        gc_cache_free(cache);
        RELEASE(x);
        free_encoder(&e);
    }
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    dist_cache_run_all(GC_DIST_TCP, 4, true, 120); /* minutes under the sanitizers on a busy machine */
    CHECK_MSG(dist_all_pass(2, hostile_rows_body, NULL, 60), "a hostile peer's row counts");
    return gc_test_result();
}
