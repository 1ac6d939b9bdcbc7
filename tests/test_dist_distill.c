/* The distillation losses over a process group without gathering (gc_distill_loss_group,
 * loss.h) over the TCP ring on the CPU, in worlds of 2 and 3 processes forked by this test:
 * each rank gives its own queries, their candidates and their teacher rows (rows that differ
 * per rank, none on a rank included), and the global loss and this rank's rows of both
 * gradients must equal one process's gc_distill_value_and_grad over the whole batch, in f64, for
 * MarginMSE and the KL alone and added to the contrastive loss (which runs around the ring); a
 * rank's teacher score that is not finite stops every rank.
 *
 * Tolerance, f64: each query's term is computed from the same rows in the same order either
 * way; what differs is the order of the sums -- the mean summed per rank, then over the ranks,
 * the contrastive term's log-sum-exps merged over blocks -- a few hundred roundings of 2^-53
 * relative to the largest term: 1e-12. */
#include "check.h"
#include "dist_spawn.h"
#include "gradcache/loss.h"

#define WORLD_MAX 3
#define DIM 5
#define F64_TOL 1e-12

typedef struct distill_case {
    const char *name;
    int64_t queries[WORLD_MAX]; /* per rank */
    int negatives;
    gc_distill_kind kind;
    double weight;
    bool contrastive; /* cosine InfoNCE at 0.1 (tiles of 2 rows) added */
} distill_case;

static const distill_case cases[] = {
    {"MarginMSE", {3, 2, 4}, 2, GC_DISTILL_MARGIN_MSE, 1, false},
    {"KL, a rank without rows", {3, 0, 2}, 1, GC_DISTILL_KL_DIV, 0.5, false},
    {"contrastive + MarginMSE", {2, 3, 1}, 1, GC_DISTILL_MARGIN_MSE, 0.3, true},
    {"contrastive + KL", {1, 2, 2}, 3, GC_DISTILL_KL_DIV, 2, true},
};

static gc_distill_options options_of(const distill_case *c, const gc_tensor *teacher,
                                     const gc_contrastive_options *in_batch) {
    return (gc_distill_options){.kind = c->kind, .similarity = GC_SIMILARITY_COSINE, .teacher_scores = teacher,
                                .student_temperature = 0.2, .teacher_temperature = 2, .weight = c->weight,
                                .contrastive = c->contrastive ? in_batch : NULL};
}

/* rows [start, end) of x, a new tensor of their own */
static gc_tensor *rows_of(const gc_tensor *x, int64_t start, int64_t end) {
    gc_tensor *view = gc_slice0(x, start, end), *copy = gc_clone(view);
    gc_tensor_release(view);
    REQUIRE(copy);
    return copy;
}

typedef struct run_args {
    const distill_case *c;
    int world;
} run_args;

static int body(int rank, int world, void *arg) {
    const distill_case *c = ((const run_args *)arg)->c;
    gc_process_group *group = dist_test_group(60);
    int64_t total = gc_test_sum_counts(c->queries, world), start = gc_test_sum_counts(c->queries, rank);
    int64_t mine = c->queries[rank], columns = 1 + c->negatives;
    gc_tensor *q = gc_uniform(GC_SHAPE(total, DIM), GC_F64, gc_cpu(), -1, 1, 50, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(total * columns, DIM), GC_F64, gc_cpu(), -1, 1, 51, 0);
    gc_tensor *teacher = gc_uniform(GC_SHAPE(total, columns), GC_F64, gc_cpu(), -3, 3, 52, 0);
    REQUIRE(q && p && teacher);
    gc_contrastive_options in_batch = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1,
                                       .method = GC_CONTRASTIVE_TILED, .tile_size = 2};
    /* one process over the whole batch */
    gc_distill_options whole = options_of(c, teacher, &in_batch);
    gc_tensor *want[2] = {NULL, NULL};
    double expected = 0;
    REQUIRE(gc_distill_value_and_grad(q, p, &whole, 1, &expected, &want[0], &want[1]) == GC_OK);
    /* this rank's rows around the group */
    gc_tensor *my_q = rows_of(q, start, start + mine), *my_p = rows_of(p, start * columns, (start + mine) * columns);
    gc_tensor *my_teacher = rows_of(teacher, start, start + mine);
    gc_distill_options local = options_of(c, my_teacher, &in_batch);
    gc_tensor *grads[2] = {NULL, NULL};
    double value = 0;
    CHECK_MSG(gc_distill_loss_group(group, my_q, my_p, &local, 1, &value, &grads[0], &grads[1]) == GC_OK, "%s: %s",
              c->name, gc_last_error());
    CHECK_MSG(fabs(value - expected) <= F64_TOL * fabs(expected), "%s, rank %d: loss %.17g, one process %.17g",
              c->name, rank, value, expected);
    gc_tensor *want_mine[2] = {rows_of(want[0], start, start + mine),
                               rows_of(want[1], start * columns, (start + mine) * columns)};
    for (int s = 0; s < 2; s++) {
        char what[128];
        snprintf(what, sizeof what, "%s, rank %d: gradient %d", c->name, rank, s);
        gc_test_expect_close(want_mine[s], grads[s], F64_TOL * gc_test_largest_abs(want[s]), 0, what);
    }
    RELEASE(q, p, teacher, want[0], want[1], my_q, my_p, my_teacher, grads[0], grads[1], want_mine[0], want_mine[1]);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1's teacher holds a nan: it fails naming the score, and rank 0, whose rows are sound,
 * stops too (before the contrastive term's ring would wait for rank 1). */
static int bad_teacher_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(60);
    gc_tensor *q = gc_uniform(GC_SHAPE(2, DIM), GC_F64, gc_cpu(), -1, 1, 50 + (uint64_t)rank, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(4, DIM), GC_F64, gc_cpu(), -1, 1, 60 + (uint64_t)rank, 0);
    double scores[4] = {1, 0, 2, rank == 1 ? NAN : 1};
    gc_tensor *teacher = gc_from_host(scores, GC_SHAPE(2, 2), GC_F64, gc_cpu());
    gc_contrastive_options in_batch = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_distill_options options = {.kind = GC_DISTILL_MARGIN_MSE, .teacher_scores = teacher, .weight = 1,
                                  .contrastive = &in_batch};
    gc_tensor *grads[2] = {NULL, NULL};
    double value = 0;
    CHECK(gc_distill_loss_group(group, q, p, &options, 1, &value, &grads[0], &grads[1]) == GC_ERR_NON_FINITE);
    const char *want = rank == 1 ? "distill_loss: teacher score [1, 1] is nan"
                                 : "distill_loss: the loss over the ranks is nan";
    CHECK_MSG(strstr(gc_last_error(), want) != NULL, "rank %d: %s", rank, gc_last_error());
    CHECK(!grads[0] && !grads[1]);
    RELEASE(q, p, teacher);
    gc_process_group_free(group);
    return gc_test_result();
}

static void test_against_one_process(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int world = 2; world <= WORLD_MAX; world++) {
            run_args args = {&cases[i], world};
            CHECK_MSG(dist_all_pass(world, body, &args, 120), "%s in a world of %d", cases[i].name, world);
        }
}

int main(void) {
    GC_TEST_CASE(test_against_one_process);
    CHECK_MSG(dist_all_pass(2, bad_teacher_body, NULL, 120), "a teacher score that is not finite");
    return gc_test_result();
}
