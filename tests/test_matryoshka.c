/* The Matryoshka loss (loss.h): against the formula written out in PyTorch
 * (tests/make_loss_fixture.py) over a base loss computed untiled, by autograd and tiled; a
 * GradCache step with it against the full-batch step, several positives included; the
 * prefix; the options that make no sense stop the program naming them. */
#include "loss_checks.h"

/* make_loss_fixture.py's "matryoshka": prefixes 8, 4, 2 weighted 1, 0.5, 0.25 of the cosine
 * InfoNCE at 0.05 */
static gc_matryoshka_options nested(const gc_contrastive_options *base) {
    return (gc_matryoshka_options){.base = gc_contrastive_loss_fn(base), .count = 3, .dims = {8, 4, 2},
                                   .weights = {1, 0.5, 0.25}};
}

static void test_against_pytorch(void) {
    gc_param_list fixture = gc_fixture_load(LOSS_FIXTURE);
    const struct {
        gc_contrastive_method method;
        int64_t tile;
        const char *name;
    } methods[] = {{GC_CONTRASTIVE_FULL, 0, "base full (autograd only)"},
                   {GC_CONTRASTIVE_AUTO, 0, "base auto (untiled)"},
                   {GC_CONTRASTIVE_TILED, 2, "base tiled by 2"}};
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
        gc_contrastive_options base = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                       .method = methods[m].method, .tile_size = methods[m].tile};
        gc_matryoshka_options options = nested(&base);
        gc_loss_fn loss = gc_matryoshka_loss_fn(&options);
        CHECK_MSG((loss.value_and_grad != NULL) == (methods[m].method != GC_CONTRASTIVE_FULL),
                  "%s: value_and_grad exactly when the base has one", methods[m].name);
        check_against_fixture(&fixture, "matryoshka", loss, methods[m].name);
    }
    gc_param_list_free(&fixture);
}

static void test_cache_matches_full_batch(void) {
    gc_contrastive_options base = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                   .method = GC_CONTRASTIVE_TILED, .tile_size = 3};
    gc_matryoshka_options options = nested(&base);
    check_cache_matches_full(gc_matryoshka_loss_fn(&options), 7, 7, "Matryoshka, tiled");
    base.method = GC_CONTRASTIVE_FULL;
    check_cache_matches_full(gc_matryoshka_loss_fn(&options), 7, 7, "Matryoshka, full");
    base = (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .positives = 2};
    check_cache_matches_full(gc_matryoshka_loss_fn(&options), 5, 10, "Matryoshka over 2 positives");
}

static void test_prefix(void) {
    double values[6] = {1, 2, 3, 4, 5, 6}, first_two[4] = {1, 2, 4, 5};
    gc_tensor *x = gc_from_host(values, GC_SHAPE(2, 3), GC_F64, gc_cpu());
    gc_tensor *want = gc_from_host(first_two, GC_SHAPE(2, 2), GC_F64, gc_cpu());
    gc_tensor *got = gc_matryoshka_prefix(x, 2);
    gc_test_expect_close(want, got, 0, 0, "the first 2 columns of [2, 3]");
    RELEASE(x, want, got);
}

/* --- programmer errors --- */

typedef struct bad_options {
    int count;
    int64_t dim;
    double weight;
} bad_options;

static void call_loss(void *arg) {
    const bad_options *b = arg;
    gc_contrastive_options base = {.temperature = 1};
    gc_matryoshka_options options = {.base = gc_contrastive_loss_fn(&base), .count = b->count, .dims = {4, b->dim},
                                     .weights = {1, b->weight}};
    gc_tensor *reps[2] = {gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu()), gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cpu())};
    gc_tensor_release(gc_matryoshka_loss(reps, 2, &options));
}

static void test_bad_options(void) {
    bad_options none = {0, 2, 1}, too_long = {2, 5, 1}, empty = {2, 0, 1}, infinite = {2, 2, INFINITY};
    gc_test_expect_fatal(call_loss, &none, "matryoshka_loss: 0 prefixes (1 to 8)");
    gc_test_expect_fatal(call_loss, &too_long, "prefix 1 of length 5, weight 1, for representation 0 [2, 4]");
    gc_test_expect_fatal(call_loss, &empty, "prefix 1 of length 0");
    gc_test_expect_fatal(call_loss, &infinite, "weight inf");
}

int main(void) {
    GC_TEST_CASE(test_against_pytorch);
    GC_TEST_CASE(test_cache_matches_full_batch);
    GC_TEST_CASE(test_prefix);
    GC_TEST_CASE(test_bad_options);
    return gc_test_result();
}
