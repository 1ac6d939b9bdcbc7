/* The GIST loss (loss.h): against the formula written out in PyTorch
 * (tests/make_loss_fixture.py), by autograd, by value_and_grad untiled and tiled; the guide's mask changing
 * the loss; a GradCache step with it (and with Matryoshka over it) against the full-batch step;
 * the options that make no sense stop the program naming them. */
#include "loss_checks.h"

/* make_loss_fixture.py's GIST cases, their options written out again */
static gc_gist_options fixture_options(const gc_param_list *fixture, const char *name, gc_contrastive_method method,
                                       int64_t tile) {
    bool absolute = strcmp(name, "gist_absolute") == 0;
    return (gc_gist_options){
        .contrastive = {.similarity = absolute ? GC_SIMILARITY_COSINE : GC_SIMILARITY_DOT,
                        .temperature = absolute ? 0.05 : 0.5,
                        .reduction = absolute ? GC_LOSS_MEAN : GC_LOSS_SUM,
                        .method = method,
                        .tile_size = tile},
        .guide_queries = fixture_entry(fixture, name, "gq"),
        .guide_passages = fixture_entry(fixture, name, "gp"),
        .margin_strategy = absolute ? GC_GIST_ABSOLUTE : GC_GIST_RELATIVE,
        .margin = absolute ? 0.1 : 0.2};
}

static void test_against_pytorch(void) {
    gc_param_list fixture = gc_fixture_load(LOSS_FIXTURE);
    const char *cases[] = {"gist_absolute", "gist_relative"};
    /* tiles of 2 and 3 rows: several tiles per block, ragged ones, and tiles in which a row's
     * positive is not (the mask's exemption of the positive must find it by its column) */
    const struct {
        gc_contrastive_method method;
        int64_t tile;
        const char *name;
    } methods[] = {{GC_CONTRASTIVE_FULL, 0, "autograd only"},
                   {GC_CONTRASTIVE_AUTO, 0, "untiled value_and_grad"},
                   {GC_CONTRASTIVE_TILED, 2, "tiled by 2"},
                   {GC_CONTRASTIVE_TILED, 3, "tiled by 3"}};
    for (size_t c = 0; c < 2; c++)
        for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
            gc_gist_options options = fixture_options(&fixture, cases[c], methods[m].method, methods[m].tile);
            gc_loss_fn loss = gc_gist_loss_fn(&options);
            CHECK_MSG((loss.value_and_grad != NULL) == (methods[m].method != GC_CONTRASTIVE_FULL),
                      "%s: value_and_grad exactly when the method is not FULL", cases[c]);
            check_against_fixture(&fixture, cases[c], loss, methods[m].name);
        }
    gc_param_list_free(&fixture);
}

/* The fixture's case masks some candidates (make_loss_fixture.py asserts it); a margin no
 * guide score reaches masks none, and the loss moves by far more than any rounding. */
static void test_mask_changes_loss(void) {
    gc_param_list fixture = gc_fixture_load(LOSS_FIXTURE);
    gc_gist_options options = fixture_options(&fixture, "gist_absolute", GC_CONTRASTIVE_AUTO, 0);
    gc_tensor *q = fixture_entry(&fixture, "gist_absolute", "q"), *p = fixture_entry(&fixture, "gist_absolute", "p");
    gc_tensor *masked = gc_gist_loss(q, p, &options);
    options.margin = -10; /* threshold: the positive's cosine + 10, above every cosine */
    gc_tensor *unmasked = gc_gist_loss(q, p, &options);
    REQUIRE(masked && unmasked);
    double with = gc_item(masked), without = gc_item(unmasked);
    CHECK_MSG(without - with > 1e-3, "masking removes candidates, so it lowers the loss: %.17g masked, %.17g not",
              with, without);
    RELEASE(masked, unmasked);
    gc_param_list_free(&fixture);
}

/* GradCache's step over an MLP's representations (OUT columns), the guide's fixed random
 * representations of the same rows; margin 0.05 masks some of their cosines, not all. */
static void test_cache_matches_full_batch(void) {
    gc_tensor *guide_queries = gc_normal(GC_SHAPE(6, 5), GC_F64, gc_cpu(), 0, 1, 40, 0);
    gc_tensor *guide_passages = gc_normal(GC_SHAPE(12, 5), GC_F64, gc_cpu(), 0, 1, 41, 0);
    gc_gist_options options = {.contrastive = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05},
                               .guide_queries = guide_queries, .guide_passages = guide_passages,
                               .margin = 0.05};
    check_cache_matches_full(gc_gist_loss_fn(&options), 6, 12, "GIST, untiled value_and_grad");
    options.contrastive.method = GC_CONTRASTIVE_TILED;
    options.contrastive.tile_size = 4;
    check_cache_matches_full(gc_gist_loss_fn(&options), 6, 12, "GIST, tiled by 4");
    /* Matryoshka over it: each prefix's student scores, the guide's whole rows masking them */
    gc_matryoshka_options nested = {.base = gc_gist_loss_fn(&options), .count = 3, .dims = {8, 4, 2},
                                    .weights = {1, 0.5, 0.25}};
    check_cache_matches_full(gc_matryoshka_loss_fn(&nested), 6, 12, "Matryoshka 8/4/2 over GIST, tiled by 4");
    options.contrastive.method = GC_CONTRASTIVE_FULL;
    options.margin_strategy = GC_GIST_RELATIVE;
    check_cache_matches_full(gc_gist_loss_fn(&options), 6, 12, "GIST, relative, by the cache's backward");
    RELEASE(guide_queries, guide_passages);
}

/* --- programmer errors --- */

typedef struct bad_options {
    int64_t guide_rows;
    bool symmetric;
    double margin;
} bad_options;

static void call_loss(void *arg) {
    const bad_options *b = arg;
    gc_tensor *q = gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu()), *p = gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu());
    gc_tensor *gq = gc_zeros(GC_SHAPE(b->guide_rows, 3), GC_F32, gc_cpu()), *gp = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_gist_options options = {.contrastive = {.temperature = 1, .symmetric = b->symmetric},
                               .guide_queries = gq, .guide_passages = gp, .margin = b->margin};
    gc_tensor_release(gc_gist_loss(q, p, &options));
}

static void test_bad_options(void) {
    bad_options rows = {3, false, 0}, symmetric = {2, true, 0}, margin = {2, false, NAN};
    gc_test_expect_fatal(call_loss, &rows, "the guide's queries must be [2, Dg] like the student's [2, 4]");
    gc_test_expect_fatal(call_loss, &symmetric, "symmetric 1");
    gc_test_expect_fatal(call_loss, &margin, "margin nan is not finite");
}

int main(void) {
    GC_TEST_CASE(test_against_pytorch);
    GC_TEST_CASE(test_mask_changes_loss);
    GC_TEST_CASE(test_cache_matches_full_batch);
    GC_TEST_CASE(test_bad_options);
    return gc_test_result();
}
