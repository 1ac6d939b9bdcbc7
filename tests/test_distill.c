/* The distillation losses (loss.h): MarginMSE and the listwise KL against sentence-transformers'
 * formulas written out in PyTorch (tests/make_distill_fixture.py), alone and added to the
 * contrastive loss, by autograd and by value_and_grad; in f32 and bf16; a GradCache step with
 * each against the full-batch step; a teacher score that is not finite is an error naming it;
 * arguments that make no sense stop the program naming them. */
#include "loss_checks.h"

#define DISTILL_FIXTURE GC_TEST_FIXTURES "/distill_v1.bin"

/* make_distill_fixture.py's CASES, their options written out again (contrastive: *in_batch) */
static gc_distill_options case_options(const gc_param_list *fixture, const char *name,
                                       gc_contrastive_options *in_batch) {
    gc_distill_options o = {.teacher_scores = fixture_entry(fixture, name, "teacher"), .weight = 1,
                            .student_temperature = 1, .teacher_temperature = 1};
    if (strcmp(name, "margin_dot") == 0) return o;
    if (strcmp(name, "margin_cosine") == 0) {
        o.similarity = GC_SIMILARITY_COSINE;
        o.weight = 0.5;
        return o;
    }
    o.kind = GC_DISTILL_KL_DIV;
    if (strcmp(name, "kl_dot") == 0) return o;
    if (strcmp(name, "kl_temperatures") == 0) {
        o.similarity = GC_SIMILARITY_COSINE;
        o.student_temperature = 0.05;
        o.teacher_temperature = 2;
        return o;
    }
    if (strcmp(name, "margin_plus_contrastive") == 0) {
        *in_batch = (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
        o = (gc_distill_options){.kind = GC_DISTILL_MARGIN_MSE, .similarity = GC_SIMILARITY_COSINE,
                                 .teacher_scores = o.teacher_scores, .weight = 0.3};
    } else { /* kl_plus_contrastive */
        *in_batch = (gc_contrastive_options){.similarity = GC_SIMILARITY_DOT, .temperature = 0.5};
        o.weight = 2;
    }
    o.contrastive = in_batch;
    return o;
}

static const char *cases[] = {"margin_dot", "margin_cosine", "kl_dot", "kl_temperatures", "margin_plus_contrastive",
                              "kl_plus_contrastive"};
#define CASE_COUNT (sizeof cases / sizeof *cases)

static void test_against_pytorch(void) {
    gc_param_list fixture = gc_fixture_load(DISTILL_FIXTURE);
    for (size_t c = 0; c < CASE_COUNT; c++) {
        gc_contrastive_options in_batch;
        gc_distill_options options = case_options(&fixture, cases[c], &in_batch);
        check_against_fixture(&fixture, cases[c], gc_distill_loss_fn(&options), "value_and_grad");
        if (options.contrastive) { /* the contrastive term tiled: the same loss */
            in_batch.method = GC_CONTRASTIVE_TILED;
            in_batch.tile_size = 2;
            check_against_fixture(&fixture, cases[c], gc_distill_loss_fn(&options), "contrastive tiled by 2");
        }
    }
    gc_param_list_free(&fixture);
}

/* The f64 cases' inputs rounded to f32 and to bf16: the loss and the gradients in the inputs'
 * dtype, within those dtypes' roundings of PyTorch's f64 values. f32: a few dozen roundings of
 * 6e-8 through scores and margins of size ~10 (1e-4 relative to the largest gradient leaves room);
 * bf16 (8 bits, 4e-3 each, computed in f32): 5e-2 of the largest gradient. */
static void check_in_dtype(const gc_param_list *fixture, const char *name, gc_dtype dtype, double tolerance) {
    gc_contrastive_options in_batch;
    gc_distill_options options = case_options(fixture, name, &in_batch);
    gc_tensor *q = gc_cast(fixture_entry(fixture, name, "q"), dtype);
    gc_tensor *p = gc_cast(fixture_entry(fixture, name, "p"), dtype);
    gc_tensor *want[2] = {fixture_entry(fixture, name, "grad_q"), fixture_entry(fixture, name, "grad_p")};
    gc_tensor *grads[2] = {NULL, NULL};
    double value = 0, expected = gc_item(fixture_entry(fixture, name, "loss"));
    REQUIRE(gc_distill_value_and_grad(q, p, &options, 1, &value, &grads[0], &grads[1]) == GC_OK);
    CHECK_MSG(fabs(value - expected) <= tolerance * fabs(expected), "%s in %s: loss %.9g, PyTorch's f64 %.9g", name,
              gc_dtype_name(dtype), value, expected);
    for (int s = 0; s < 2; s++) {
        char what[128];
        snprintf(what, sizeof what, "%s in %s: gradient %d", name, gc_dtype_name(dtype), s);
        CHECK_MSG(grads[s]->dtype == dtype, "%s: the gradient's dtype is the input's", what);
        gc_test_expect_close(want[s], grads[s], tolerance * gc_test_largest_abs(want[s]), 0, what);
    }
    RELEASE(q, p, grads[0], grads[1]);
}

static void test_dtypes(void) {
    gc_param_list fixture = gc_fixture_load(DISTILL_FIXTURE);
    for (size_t c = 0; c < CASE_COUNT; c++) {
        check_in_dtype(&fixture, cases[c], GC_F32, 1e-4);
        check_in_dtype(&fixture, cases[c], GC_BF16, 5e-2);
    }
    gc_param_list_free(&fixture);
}

/* Teacher scores [queries, 1 + negatives] from a seed, in f64. */
static gc_tensor *teacher_of(int64_t queries, int64_t negatives, uint64_t seed) {
    return gc_uniform(GC_SHAPE(queries, 1 + negatives), GC_F64, gc_cpu(), -3, 3, seed, 0);
}

static void test_cache_matches_full_batch(void) {
    gc_tensor *teacher = teacher_of(5, 2, 40);
    gc_contrastive_options in_batch = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1,
                                       .method = GC_CONTRASTIVE_TILED, .tile_size = 4};
    gc_distill_options margin = {.kind = GC_DISTILL_MARGIN_MSE, .teacher_scores = teacher, .weight = 1};
    check_cache_matches_full(gc_distill_loss_fn(&margin), 5, 15, "MarginMSE, dot");
    gc_distill_options kl = {.kind = GC_DISTILL_KL_DIV, .similarity = GC_SIMILARITY_COSINE, .teacher_scores = teacher,
                             .student_temperature = 0.2, .teacher_temperature = 2, .weight = 1};
    check_cache_matches_full(gc_distill_loss_fn(&kl), 5, 15, "KL, cosine");
    margin.contrastive = &in_batch;
    margin.weight = 0.5;
    check_cache_matches_full(gc_distill_loss_fn(&margin), 5, 15, "contrastive (tiled) + 0.5 MarginMSE");
    gc_tensor_release(teacher);
}

/* A teacher score that is not finite (what a file said) is an error naming it, not a nan loss. */
static void test_non_finite_teacher(void) {
    double scores[6] = {1, 0.5, 2, INFINITY, 1, 0};
    gc_tensor *teacher = gc_from_host(scores, GC_SHAPE(2, 3), GC_F64, gc_cpu());
    gc_tensor *q = gc_uniform(GC_SHAPE(2, 4), GC_F64, gc_cpu(), -1, 1, 1, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(6, 4), GC_F64, gc_cpu(), -1, 1, 2, 0);
    gc_distill_options options = {.kind = GC_DISTILL_MARGIN_MSE, .teacher_scores = teacher, .weight = 1};
    gc_tensor *grads[2] = {NULL, NULL};
    double value = 0;
    CHECK(gc_distill_value_and_grad(q, p, &options, 1, &value, &grads[0], &grads[1]) == GC_ERR_NON_FINITE);
    CHECK_MSG(strstr(gc_last_error(), "teacher score [1, 0] is inf") != NULL, "message: %s", gc_last_error());
    CHECK(!grads[0] && !grads[1]);
    gc_clear_error();
    CHECK(gc_distill_loss(q, p, &options) == NULL && gc_last_status() == GC_ERR_NON_FINITE);
    gc_clear_error();
    RELEASE(teacher, q, p);
}

/* --- programmer errors --- */

typedef struct bad_call {
    int64_t passages, teacher_columns;
    gc_distill_kind kind;
    double student_temperature;
} bad_call;

static void call_loss(void *arg) {
    const bad_call *b = arg;
    gc_tensor *q = gc_zeros(GC_SHAPE(3, 4), GC_F32, gc_cpu());
    gc_tensor *p = gc_zeros(GC_SHAPE(b->passages, 4), GC_F32, gc_cpu());
    gc_tensor *teacher = gc_zeros(GC_SHAPE(3, b->teacher_columns), GC_F32, gc_cpu());
    gc_distill_options options = {.kind = b->kind, .teacher_scores = teacher, .weight = 1,
                                  .student_temperature = b->student_temperature, .teacher_temperature = 1};
    gc_tensor_release(gc_distill_loss(q, p, &options));
}

static void test_bad_arguments(void) {
    bad_call wrong_passages = {8, 3, GC_DISTILL_MARGIN_MSE, 1}, no_negative = {3, 1, GC_DISTILL_KL_DIV, 1},
             cold = {9, 3, GC_DISTILL_KL_DIV, 0};
    gc_test_expect_fatal(call_loss, &wrong_passages, "needs queries [Nq, D], passages [Nq (1 + k), D] and teacher "
                                                     "scores [Nq, 1 + k] with k >= 1, got [3, 4] f32 cpu, [8, 4]");
    gc_test_expect_fatal(call_loss, &no_negative, "and [3, 1] f32 cpu");
    gc_test_expect_fatal(call_loss, &cold, "distill_loss: student temperature 0 is not positive and finite");
}

int main(void) {
    GC_TEST_CASE(test_against_pytorch);
    GC_TEST_CASE(test_dtypes);
    GC_TEST_CASE(test_cache_matches_full_batch);
    GC_TEST_CASE(test_non_finite_teacher);
    GC_TEST_CASE(test_bad_arguments);
    return gc_test_result();
}
