/* The losses beyond one positive across processes (dist_cache_checks.h): a GradCache step in
 * a world of 2, each rank giving its own rows, against one process over the whole batch with
 * the same loss (f64: norm-relative 1e-10), one all-reduce per bucket per step: several
 * positives per query (tiled, symmetric), Matryoshka (over the autograd and the tiled base),
 * and Matryoshka over several positives, GIST (tiled and untiled: the guide's representations of
 * the global batch given in the options, the same on every rank); and 3 steps accumulated (gc_ddp_micro_batch around
 * gc_cache_step, what train --accumulate does) reduced once, equal to one process's 3 steps;
 * and the functional API's step (gc_cached_forward per small batch, gc_functional_loss,
 * gc_closures_run) against one process's gc_cache_step, one reduction per step. */
#include "dist_cache_checks.h"

int main(void) {
    gc_contrastive_options multi = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .positives = 2,
                                    .method = GC_CONTRASTIVE_TILED, .tile_size = 3, .symmetric = true};
    gc_contrastive_options full = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                   .method = GC_CONTRASTIVE_FULL};
    gc_contrastive_options tiled_multi = multi;
    tiled_multi.symmetric = false;
    gc_matryoshka_options over_full = {.base = gc_contrastive_loss_fn(&full), .count = 3, .dims = {8, 4, 2},
                                       .weights = {1, 0.5, 0.25}};
    gc_matryoshka_options over_multi = over_full;
    over_multi.base = gc_contrastive_loss_fn(&tiled_multi);
    /* GIST over the scenarios' global batch of 8 queries and 16 passages (1 hard negative):
     * the guide's representations drawn alike on every rank; margin 0.05 masks some */
    gc_tensor *guide_queries = gc_normal(GC_SHAPE(8, 5), GC_F64, gc_cpu(), 0, 1, 40, 0);
    gc_tensor *guide_passages = gc_normal(GC_SHAPE(16, 5), GC_F64, gc_cpu(), 0, 1, 41, 0);
    gc_gist_options gist = {.contrastive = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                            .method = GC_CONTRASTIVE_TILED, .tile_size = 3},
                            .guide_queries = guide_queries, .guide_passages = guide_passages, .margin = 0.05};
    gc_gist_options gist_untiled = gist;
    gist_untiled.contrastive.method = GC_CONTRASTIVE_AUTO;
    gist_untiled.margin_strategy = GC_GIST_RELATIVE;
    gc_loss_fn losses[] = {gc_contrastive_loss_fn(&multi), gc_matryoshka_loss_fn(&over_full),
                           gc_matryoshka_loss_fn(&over_multi), gc_gist_loss_fn(&gist),
                           gc_gist_loss_fn(&gist_untiled)};
    /* gradient accumulation around GradCache: 3 steps, one all-reduce per bucket in all */
    const dist_scenario accumulated = {"f64, 3 accumulated steps, unequal rows", GC_F64, {5, 3}, 1, 2,
                                       .backend = GC_DIST_TCP, .accumulate = 3};
    /* the functional API: small batches of 2 queries and 4 passages, one reduction per step */
    const dist_scenario functional = {"f64, functional API, 1 hard negative, unequal rows", GC_F64, {5, 3}, 1, 2,
                                      .backend = GC_DIST_TCP, .functional = true};
    CHECK_MSG(dist_all_pass(2, dist_cache_body, (void *)&functional, 120), "world 2: %s", functional.name);
    const dist_scenario scenarios[] = {
        {"f64, 2 positives and 1 hard negative, tiled, symmetric, unequal rows", GC_F64, {5, 3}, 1, 2,
         .backend = GC_DIST_TCP, .loss = &losses[0], .positives = 2},
        {"f64, Matryoshka 8/4/2, unequal rows", GC_F64, {4, 7}, 0, 3, .backend = GC_DIST_TCP, .loss = &losses[1]},
        {"f64, Matryoshka over 2 positives, tied", GC_F64, {4, 4}, 0, 2, .tied = true, .backend = GC_DIST_TCP,
         .loss = &losses[2], .positives = 2},
        {"f64, GIST tiled by 3, 1 hard negative, unequal rows", GC_F64, {5, 3}, 1, 2, .backend = GC_DIST_TCP,
         .loss = &losses[3]},
        {"f64, GIST untiled, relative margin, 1 hard negative, unequal rows", GC_F64, {5, 3}, 1, 2,
         .backend = GC_DIST_TCP, .loss = &losses[4]},
    };
    CHECK_MSG(dist_all_pass(2, dist_cache_body, (void *)&accumulated, 120), "world 2: %s", accumulated.name);
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++)
        CHECK_MSG(dist_all_pass(2, dist_cache_body, (void *)&scenarios[i], 120), "world 2: %s", scenarios[i].name);
    RELEASE(guide_queries, guide_passages);
    return gc_test_result();
}
