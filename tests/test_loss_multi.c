/* The contrastive loss with several positives per query (loss.h): against the formula written
 * out in PyTorch (tests/make_loss_fixture.py) through the untiled loss, its autograd gradient
 * and the tiled loss; a GradCache step with it against the full-batch step; the arguments that
 * make no sense stop the program naming them. */
#include "loss_checks.h"

/* The fixture's cases, their options as make_loss_fixture.py's CASES has them. */
static gc_contrastive_options case_options(const char *name, const gc_param_list *fixture) {
    if (strcmp(name, "multi_cosine") == 0)
        return (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .positives = 2};
    if (strcmp(name, "multi_symmetric") == 0)
        return (gc_contrastive_options){.similarity = GC_SIMILARITY_DOT, .temperature = 0.5, .positives = 3,
                                        .reduction = GC_LOSS_SUM, .symmetric = true};
    return (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE, .temperature = 0.2, .positives = 2,
                                    .targets = fixture_entry(fixture, name, "targets")};
}

static void test_against_pytorch(void) {
    gc_param_list fixture = gc_fixture_load(LOSS_FIXTURE);
    const char *cases[] = {"multi_cosine", "multi_symmetric", "multi_targets"};
    const struct {
        gc_contrastive_method method;
        int64_t tile;
        const char *name;
    } methods[] = {{GC_CONTRASTIVE_FULL, 0, "full"}, {GC_CONTRASTIVE_AUTO, 0, "auto (untiled)"},
                   {GC_CONTRASTIVE_TILED, 2, "tiled by 2"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
            gc_contrastive_options options = case_options(cases[c], &fixture);
            options.method = methods[m].method;
            options.tile_size = methods[m].tile;
            check_against_fixture(&fixture, cases[c], gc_contrastive_loss_fn(&options), methods[m].name);
        }
    gc_param_list_free(&fixture);
}

/* 5 queries, each followed by 2 positives and 1 hard negative; as the loss in every way it
 * can be computed */
/* The ring (gc_loss_fn.group_value_and_grad) takes several positives too, one pass per positive
 * (its values: test_dist_ring_positives.c). */
static void test_ring(void) {
    gc_contrastive_options one = {.temperature = 1}, several = {.temperature = 1, .positives = 2};
    CHECK(gc_contrastive_loss_fn(&one).group_value_and_grad != NULL);
    CHECK(gc_contrastive_loss_fn(&several).group_value_and_grad != NULL);
}

static void test_cache_matches_full_batch(void) {
    gc_contrastive_options full = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .positives = 2,
                                   .method = GC_CONTRASTIVE_FULL};
    check_cache_matches_full(gc_contrastive_loss_fn(&full), 5, 15, "2 positives, full");
    gc_contrastive_options tiled = full;
    tiled.method = GC_CONTRASTIVE_TILED;
    tiled.tile_size = 4;
    check_cache_matches_full(gc_contrastive_loss_fn(&tiled), 5, 15, "2 positives, tiled");
    tiled.symmetric = true;
    check_cache_matches_full(gc_contrastive_loss_fn(&tiled), 5, 15, "2 positives, tiled, symmetric");
}

/* --- programmer errors --- */

typedef struct bad_call {
    int64_t passages, positives, target_columns; /* target_columns 0: no targets */
} bad_call;

static void call_loss(void *arg) {
    const bad_call *b = arg;
    gc_tensor *q = gc_zeros(GC_SHAPE(3, 4), GC_F32, gc_cpu()), *p = gc_zeros(GC_SHAPE(b->passages, 4), GC_F32, gc_cpu());
    gc_tensor *targets = b->target_columns == 1 ? gc_zeros(GC_SHAPE(3), GC_I32, gc_cpu())
                         : b->target_columns   ? gc_zeros(GC_SHAPE(3, b->target_columns), GC_I32, gc_cpu())
                                               : NULL;
    gc_contrastive_options options = {.temperature = 1, .positives = b->positives, .targets = targets};
    gc_tensor_release(gc_contrastive_loss(q, p, &options));
}

static void test_bad_arguments(void) {
    bad_call fewer_passages = {3, 2, 0}, one_column = {6, 2, 1}, wrong_columns = {6, 2, 3}, negative = {6, -1, 0};
    gc_test_expect_fatal(call_loss, &fewer_passages, "3 passages [3, 4] f32 cpu are not a multiple of 3 queries");
    gc_test_expect_fatal(call_loss, &one_column, "needs i32 targets [3, 2] for queries [3, 4] f32 cpu with 2 positives each, got [3] i32");
    gc_test_expect_fatal(call_loss, &wrong_columns, "2 positives each, got [3, 3]");
    gc_test_expect_fatal(call_loss, &negative, "-1 positives per query");
}

int main(void) {
    GC_TEST_CASE(test_against_pytorch);
    GC_TEST_CASE(test_cache_matches_full_batch);
    GC_TEST_CASE(test_ring);
    GC_TEST_CASE(test_bad_arguments);
    return gc_test_result();
}
