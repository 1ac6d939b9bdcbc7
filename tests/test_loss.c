/* Losses on the CPU (gradcache/loss.h): cross-entropy against hand-computed values, with large
 * and infinite logits, both reductions, no rows, 16-bit logits and refused targets; the
 * contrastive loss with dot and cosine similarity against a direct double loop, the hard
 * negatives layout, temperature, 16-bit inputs, no queries and refused arguments; finite-
 * difference gradients of both; and the gc_loss_fn wrapper. */
#include "gradcheck.h"
#include "same_bytes.h"
#include "values.h"

/* f32 results of a few operations on values of order 1 (log-softmax, a mean): each rounding
 * is within 2^-24 relative, so 1e-6 is a few of them and far below any wrong formula. */
#define F32_TOL 1e-6
/* f64 results of a few dozen operations on values of order 1. */
#define F64_TOL 1e-12

static gc_tensor *i32_tensor(int64_t n, const int32_t *values) {
    gc_tensor *t = gc_from_host(values, 1, &n, GC_I32, gc_cpu());
    REQUIRE(t);
    return t;
}

/* gc_cross_entropy of hand-written logits [rows, cols] of `dtype`, as a double. */
static double cross_entropy_of(gc_dtype dtype, int64_t rows, int64_t cols, const double *logits_values,
                               const int32_t *target_values, gc_loss_reduction reduction) {
    gc_tensor *logits = gc_test_tensor(dtype, GC_SHAPE(rows, cols), logits_values);
    gc_tensor *targets = i32_tensor(rows, target_values);
    gc_tensor *loss = gc_cross_entropy(logits, targets, reduction);
    REQUIRE(loss);
    CHECK(loss->ndim == 0 && loss->dtype == gc_working_dtype(dtype)); /* f32 for 16-bit logits */
    double value = gc_item(loss);
    gc_tensor_release(logits);
    gc_tensor_release(targets);
    gc_tensor_release(loss);
    return value;
}

static void test_cross_entropy_values(void) {
    /* row 0: softmax(0, ln 2, ln 3) = (1, 2, 3) / 6, target 2: -ln(3/6) = ln 2;
     * row 1: uniform over 3 classes, target 0: ln 3 */
    const double logits[] = {0, log(2.0), log(3.0), 1, 1, 1};
    const int32_t targets[] = {2, 0};
    double mean = (log(2.0) + log(3.0)) / 2, sum = log(2.0) + log(3.0);
    CHECK_NEAR(cross_entropy_of(GC_F32, 1, 3, logits, targets, GC_LOSS_MEAN), log(2.0), F32_TOL, 0);
    CHECK_NEAR(cross_entropy_of(GC_F32, 2, 3, logits, targets, GC_LOSS_MEAN), mean, F32_TOL, 0);
    CHECK_NEAR(cross_entropy_of(GC_F32, 2, 3, logits, targets, GC_LOSS_SUM), sum, F32_TOL, 0);
    CHECK_NEAR(cross_entropy_of(GC_F64, 2, 3, logits, targets, GC_LOSS_MEAN), mean, F64_TOL, 0);
    /* 16-bit logits hold ln 2 and ln 3 to 2^-11 (f16) and 2^-8 (bf16) relative; the loss is
     * computed in f32 from them: a few of their ulps at values near 1. */
    CHECK_NEAR(cross_entropy_of(GC_F16, 2, 3, logits, targets, GC_LOSS_MEAN), mean, 4e-3, 0);
    CHECK_NEAR(cross_entropy_of(GC_BF16, 2, 3, logits, targets, GC_LOSS_MEAN), mean, 3e-2, 0);
}

static void test_cross_entropy_extremes(void) {
    /* Large logits: a naive exp overflows f32 at 89; log-softmax subtracts the max first.
     * Row 0 keeps the huge target (loss e^-2000, 0 in f32); row 1 picks the one 2000 below
     * (loss 2000); row 2 ties at 10^4 (ln 2). */
    const double large[] = {1000, 0, -1000, 1000, 0, -1000, 1e4, 1e4, -1e4};
    CHECK_NEAR(cross_entropy_of(GC_F32, 1, 3, large, (const int32_t[]){0}, GC_LOSS_SUM), 0, F32_TOL, 0);
    CHECK_NEAR(cross_entropy_of(GC_F32, 1, 3, large + 3, (const int32_t[]){2}, GC_LOSS_SUM), 2000, 0, F32_TOL);
    CHECK_NEAR(cross_entropy_of(GC_F32, 1, 3, large + 6, (const int32_t[]){1}, GC_LOSS_SUM), log(2.0), F32_TOL, 0);
    /* A -inf logit in another class (a masked class) leaves the loss finite: ln 2. */
    const double masked[] = {-INFINITY, 0, 0};
    CHECK_NEAR(cross_entropy_of(GC_F32, 1, 3, masked, (const int32_t[]){1}, GC_LOSS_MEAN), log(2.0), F32_TOL, 0);
    /* No rows: the mean of nothing is nan (as in PyTorch), the sum 0. */
    CHECK(isnan(cross_entropy_of(GC_F32, 0, 3, (const double[]){0}, (const int32_t[]){0}, GC_LOSS_MEAN)));
    CHECK(cross_entropy_of(GC_F32, 0, 3, (const double[]){0}, (const int32_t[]){0}, GC_LOSS_SUM) == 0);
}

/* --- the contrastive loss against a direct computation --- */

typedef struct contrastive_case {
    int64_t n_queries, n_passages, dim;
    const int32_t *targets; /* NULL: i * (Np / Nq) */
    gc_similarity similarity;
    double temperature;
    gc_loss_reduction reduction;
} contrastive_case;

static double dot(const double *a, const double *b, int64_t dim) {
    double sum = 0;
    for (int64_t k = 0; k < dim; k++) sum += a[k] * b[k];
    return sum;
}

/* The loss in double from its definition: scores s_ij = sim(q_i, p_j) / temperature, with
 * cosine sim = q.p / (|q| |p|); loss_i = log sum_j exp(s_ij) - s_i,target_i. */
static double reference_loss(const gc_tensor *queries, const gc_tensor *passages, const contrastive_case *c) {
    int64_t nq = c->n_queries, np = c->n_passages, dim = c->dim;
    double *q = malloc(sizeof(double) * (size_t)(nq * dim + 1)), *p = malloc(sizeof(double) * (size_t)(np * dim + 1));
    double *scores = malloc(sizeof(double) * (size_t)(np + 1));
    REQUIRE(q && p && scores);
    gc_to_host_f64(queries, q);
    gc_to_host_f64(passages, p);
    double total = 0;
    for (int64_t i = 0; i < nq; i++) {
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < np; j++) {
            double sim = dot(q + i * dim, p + j * dim, dim);
            if (c->similarity == GC_SIMILARITY_COSINE)
                sim /= sqrt(dot(q + i * dim, q + i * dim, dim)) * sqrt(dot(p + j * dim, p + j * dim, dim));
            scores[j] = sim / c->temperature;
            max = fmax(max, scores[j]);
        }
        for (int64_t j = 0; j < np; j++) sum += exp(scores[j] - max);
        int64_t target = c->targets ? c->targets[i] : i * (np / nq);
        total += max + log(sum) - scores[target];
    }
    free(q);
    free(p);
    free(scores);
    return c->reduction == GC_LOSS_MEAN ? total / (double)nq : total;
}

/* gc_contrastive_loss of c on queries and passages; NULL when it failed. */
static gc_tensor *contrastive_of(const gc_tensor *queries, const gc_tensor *passages, const contrastive_case *c) {
    gc_tensor *targets = c->targets ? i32_tensor(c->n_queries, c->targets) : NULL;
    gc_contrastive_options options = {.similarity = c->similarity, .temperature = c->temperature, .targets = targets, .reduction = c->reduction};
    gc_tensor *loss = gc_contrastive_loss(queries, passages, &options);
    gc_tensor_release(targets);
    return loss;
}

/* Random f64 inputs: the loss against reference_loss. */
static void expect_reference(const contrastive_case *c, const char *what) {
    gc_tensor *queries = gc_test_random(GC_SHAPE(c->n_queries, c->dim), GC_F64, 101);
    gc_tensor *passages = gc_test_random(GC_SHAPE(c->n_passages, c->dim), GC_F64, 102);
    gc_tensor *loss = contrastive_of(queries, passages, c);
    REQUIRE(loss);
    CHECK(loss->ndim == 0 && loss->dtype == GC_F64);
    double want = reference_loss(queries, passages, c), got = gc_item(loss);
    CHECK_MSG(fabs(got - want) <= F64_TOL * (1 + fabs(want)), "%s: got %.17g, want %.17g", what, got, want);
    gc_tensor_release(queries);
    gc_tensor_release(passages);
    gc_tensor_release(loss);
}

static void test_contrastive_values(void) {
    const int32_t explicit_targets[] = {2, 0, 7};
    contrastive_case cases[] = {
        {3, 3, 4, NULL, GC_SIMILARITY_DOT, 1.0, GC_LOSS_MEAN},
        {3, 3, 4, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_MEAN},
        {3, 9, 5, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_SUM},  /* two hard negatives per query */
        {3, 9, 5, NULL, GC_SIMILARITY_COSINE, 0.2, GC_LOSS_MEAN},
        {3, 9, 5, explicit_targets, GC_SIMILARITY_COSINE, 0.2, GC_LOSS_SUM},
        {1, 1, 3, NULL, GC_SIMILARITY_DOT, 1.0, GC_LOSS_MEAN}, /* one pair: log 1 = 0 */
    };
    const char *names[] = {"dot", "cosine", "dot, hard negatives", "cosine, hard negatives",
                           "explicit targets", "one pair"};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) expect_reference(&cases[k], names[k]);
}

/* Np = 3 Nq with query i's positive at row 3i: the default targets and the same targets
 * given explicitly run the same ops, so the losses are identical. */
static void test_hard_negative_layout(void) {
    gc_tensor *queries = gc_test_random(GC_SHAPE(4, 6), GC_F32, 7), *passages = gc_test_random(GC_SHAPE(12, 6), GC_F32, 8);
    const int32_t every_third[] = {0, 3, 6, 9};
    contrastive_case implicit = {4, 12, 6, NULL, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_MEAN};
    contrastive_case explicit = implicit;
    explicit.targets = every_third;
    gc_tensor *a = contrastive_of(queries, passages, &implicit), *b = contrastive_of(queries, passages, &explicit);
    gc_test_expect_same_bytes(a, b, "default targets against explicit 3i");
    gc_tensor_release(queries);
    gc_tensor_release(passages);
    gc_tensor_release(a);
    gc_tensor_release(b);
}

/* Dividing dot scores by a temperature t is scaling the queries by 1/t. */
static void test_temperature(void) {
    gc_tensor *queries = gc_test_random(GC_SHAPE(3, 4), GC_F64, 9), *passages = gc_test_random(GC_SHAPE(6, 4), GC_F64, 10);
    gc_tensor *scaled = gc_mul_scalar(queries, 1 / 0.25);
    contrastive_case tempered = {3, 6, 4, NULL, GC_SIMILARITY_DOT, 0.25, GC_LOSS_MEAN};
    contrastive_case plain = tempered;
    plain.temperature = 1.0;
    gc_tensor *a = contrastive_of(queries, passages, &tempered), *b = contrastive_of(scaled, passages, &plain);
    gc_tensor *c = contrastive_of(queries, passages, &plain);
    REQUIRE(a && b && c);
    CHECK_NEAR(gc_item(a), gc_item(b), F64_TOL, F64_TOL);
    CHECK(fabs(gc_item(a) - gc_item(c)) > 0.01); /* the temperature matters */
    gc_tensor *tensors[] = {queries, passages, scaled, a, b, c};
    for (int i = 0; i < 6; i++) gc_tensor_release(tensors[i]);
}

/* 16-bit inputs are computed in f32 (an f32 loss). Rows of length ~100 in D = 16 have
 * ||x||^2 ~ 10^5, past f16's 65504: cosine must still see unit vectors. */
static void test_contrastive_16_bit(void) {
    contrastive_case c = {2, 4, 16, NULL, GC_SIMILARITY_COSINE, 0.5, GC_LOSS_MEAN};
    gc_tensor *queries = gc_test_random_in(GC_SHAPE(2, 16), GC_F64, -100, 100, 11);
    gc_tensor *passages = gc_test_random_in(GC_SHAPE(4, 16), GC_F64, -100, 100, 12);
    const gc_dtype dtypes[] = {GC_F16, GC_BF16};
    for (size_t d = 0; d < 2; d++) {
        gc_tensor *q = gc_cast(queries, dtypes[d]), *p = gc_cast(passages, dtypes[d]);
        gc_tensor *loss = contrastive_of(q, p, &c);
        REQUIRE(loss);
        CHECK(loss->dtype == GC_F32);
        /* Against the reference on the rounded inputs, so only the f32 arithmetic differs. */
        CHECK_NEAR(gc_item(loss), reference_loss(q, p, &c), 1e-5, 1e-5);
        gc_tensor_release(q);
        gc_tensor_release(p);
        gc_tensor_release(loss);
    }
    gc_tensor_release(queries);
    gc_tensor_release(passages);
}

static void test_contrastive_empty(void) {
    gc_tensor *queries = gc_zeros(GC_SHAPE(0, 4), GC_F32, gc_cpu()), *passages = gc_ones(GC_SHAPE(4, 4), GC_F32, gc_cpu());
    contrastive_case mean = {0, 4, 4, NULL, GC_SIMILARITY_COSINE, 1.0, GC_LOSS_MEAN}, sum = mean;
    sum.reduction = GC_LOSS_SUM;
    gc_tensor *a = contrastive_of(queries, passages, &mean), *b = contrastive_of(queries, passages, &sum);
    REQUIRE(a && b);
    CHECK(isnan(gc_item(a)));
    CHECK(gc_item(b) == 0);
    gc_tensor *tensors[] = {queries, passages, a, b};
    for (int i = 0; i < 4; i++) gc_tensor_release(tensors[i]);
}

/* --- gradients (finite differences in f64, tests/gradcheck.h) --- */

static gc_tensor *cross_entropy_op(gc_tensor *const *inputs, const void *context) {
    return gc_cross_entropy(inputs[0], context, GC_LOSS_MEAN);
}

static gc_tensor *contrastive_op(gc_tensor *const *inputs, const void *context) {
    return contrastive_of(inputs[0], inputs[1], context);
}

static void test_gradients(void) {
    gc_tensor *logits = gc_test_leaf(GC_SHAPE(4, 5), -2, 2, 13);
    gc_tensor *targets = i32_tensor(4, (const int32_t[]){4, 0, 2, 2});
    gc_test_gradcheck("cross_entropy", cross_entropy_op, &logits, 1, targets);
    gc_tensor_release(logits);
    gc_tensor_release(targets);

    const int32_t explicit_targets[] = {5, 1, 3};
    const contrastive_case cases[] = {
        {3, 6, 4, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_MEAN},
        {3, 6, 4, NULL, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_SUM},
        {3, 6, 4, explicit_targets, GC_SIMILARITY_COSINE, 0.3, GC_LOSS_MEAN},
    };
    const char *names[] = {"contrastive dot", "contrastive cosine", "contrastive cosine, explicit targets"};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gc_tensor *inputs[] = {gc_test_leaf(GC_SHAPE(3, 4), -1, 1, 20 + k), gc_test_leaf(GC_SHAPE(6, 4), -1, 1, 30 + k)};
        gc_test_gradcheck(names[k], contrastive_op, inputs, 2, &cases[k]);
        gc_tensor_release(inputs[0]);
        gc_tensor_release(inputs[1]);
    }
}

/* Gradients reach 16-bit leaves through the f32 computation, in the leaves' dtype. */
static void test_gradient_16_bit(void) {
    gc_tensor *q = gc_test_random(GC_SHAPE(2, 8), GC_BF16, 14), *p = gc_test_random(GC_SHAPE(4, 8), GC_BF16, 15);
    gc_set_requires_grad(q, true);
    gc_set_requires_grad(p, true);
    contrastive_case c = {2, 4, 8, NULL, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_MEAN};
    gc_tensor *loss = contrastive_of(q, p, &c);
    REQUIRE(loss && gc_backward(&loss, NULL, 1) == GC_OK);
    CHECK(gc_grad(q) && gc_grad(q)->dtype == GC_BF16 && gc_same_shape(gc_grad(q), q));
    CHECK(gc_grad(p) && gc_grad(p)->dtype == GC_BF16 && gc_same_shape(gc_grad(p), p));
    gc_tensor_release(loss);
    gc_tensor_release(q);
    gc_tensor_release(p);
}

/* --- the gc_loss_fn wrapper --- */

static void test_loss_fn(void) {
    gc_tensor *reps[] = {gc_test_random(GC_SHAPE(2, 3), GC_F32, 16), gc_test_random(GC_SHAPE(4, 3), GC_F32, 17)};
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_loss_fn fn = gc_contrastive_loss_fn(&options);
    CHECK(fn.value_and_grad != NULL && fn.args == &options);
    gc_contrastive_options full = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                   .method = GC_CONTRASTIVE_FULL};
    CHECK(gc_contrastive_loss_fn(&full).value_and_grad == NULL); /* GradCache differentiates the forward */
    gc_tensor *via_fn = fn.forward(reps, 2, fn.args), *direct = gc_contrastive_loss(reps[0], reps[1], &options);
    gc_test_expect_same_bytes(direct, via_fn, "gc_loss_fn forward");
    gc_tensor_release(via_fn);
    gc_tensor_release(direct);
    gc_tensor_release(reps[0]);
    gc_tensor_release(reps[1]);
}

/* --- refused arguments --- */

static void cross_entropy_with(int64_t rows, int64_t cols, gc_dtype logits_dtype, const int32_t *targets,
                               int64_t n_targets) {
    gc_tensor *logits = gc_zeros(rows < 0 ? 1 : 2, (const int64_t[]){rows < 0 ? cols : rows, cols}, logits_dtype,
                                 gc_cpu());
    gc_cross_entropy(logits, i32_tensor(n_targets, targets), GC_LOSS_MEAN);
}
static void target_too_big(void *arg) { (void)arg; cross_entropy_with(3, 4, GC_F32, (const int32_t[]){0, 3, 4}, 3); }
static void target_negative(void *arg) { (void)arg; cross_entropy_with(2, 4, GC_F32, (const int32_t[]){-1, 0}, 2); }
static void logits_1d(void *arg) { (void)arg; cross_entropy_with(-1, 4, GC_F32, (const int32_t[]){0}, 1); }
static void logits_i32(void *arg) { (void)arg; cross_entropy_with(1, 4, GC_I32, (const int32_t[]){0}, 1); }
static void targets_short(void *arg) { (void)arg; cross_entropy_with(3, 4, GC_F32, (const int32_t[]){0, 1}, 2); }
static void targets_f32(void *arg) {
    (void)arg;
    gc_tensor *logits = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu()), *targets = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu());
    gc_cross_entropy(logits, targets, GC_LOSS_MEAN);
}

typedef struct bad_contrastive {
    int64_t n_queries, n_passages, query_dim, passage_dim;
    gc_dtype query_dtype;
    double temperature;
    const int32_t *targets;
    int64_t n_targets;
} bad_contrastive;

static void contrastive_with(void *arg) {
    const bad_contrastive *b = arg;
    gc_tensor *queries = gc_zeros(GC_SHAPE(b->n_queries, b->query_dim), b->query_dtype, gc_cpu());
    gc_tensor *passages = gc_zeros(GC_SHAPE(b->n_passages, b->passage_dim), GC_F32, gc_cpu());
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT,
                                      .temperature = b->temperature,
                                      .targets = b->targets ? i32_tensor(b->n_targets, b->targets) : NULL};
    gc_contrastive_loss(queries, passages, &options);
}
static void contrastive_no_options(void *arg) {
    (void)arg;
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_contrastive_loss(x, x, NULL);
}
static void loss_fn_three_reps(void *arg) {
    (void)arg;
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 1.0};
    gc_loss_fn fn = gc_contrastive_loss_fn(&options);
    gc_tensor *x = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    fn.forward((gc_tensor *[]){x, x, x}, 3, fn.args);
}

static void test_errors(void) {
    gc_test_expect_fatal(target_too_big, NULL, "cross_entropy: target 4 at position 2 of targets [3] i32 cpu is outside [0, 4)");
    gc_test_expect_fatal(target_negative, NULL, "cross_entropy: target -1 at position 0 of targets [2] i32 cpu is outside [0, 4)");
    gc_test_expect_fatal(logits_1d, NULL, "cross_entropy: needs logits [N, C], got [4] f32 cpu");
    gc_test_expect_fatal(logits_i32, NULL, "cross_entropy: needs a floating-point tensor, got [1, 4] i32 cpu");
    gc_test_expect_fatal(targets_short, NULL, "cross_entropy: needs i32 targets [3] for logits [3, 4] f32 cpu, got [2]");
    gc_test_expect_fatal(targets_f32, NULL, "cross_entropy: needs i32 targets [2] for logits [2, 3] f32 cpu, got [2] f32");

    const int32_t too_big[] = {0, 9};
    const bad_contrastive cases[] = {
        {2, 5, 3, 3, GC_F32, 1.0, NULL, 0},    /* 5 passages for 2 queries */
        {2, 4, 3, 5, GC_F32, 1.0, NULL, 0},    /* D differs */
        {2, 4, 3, 3, GC_F16, 1.0, NULL, 0},    /* dtypes differ */
        {2, 4, 3, 3, GC_F32, 0.0, NULL, 0},    /* temperature 0 */
        {2, 4, 3, 3, GC_F32, -1.0, NULL, 0},
        {2, 4, 3, 3, GC_F32, NAN, NULL, 0},
        {2, 4, 3, 3, GC_F32, INFINITY, NULL, 0},
        {2, 4, 3, 3, GC_F32, 1.0, too_big, 1}, /* one target for two queries */
        {2, 4, 3, 3, GC_F32, 1.0, too_big, 2}, /* target 9 of 4 passages */
    };
    const char *messages[] = {
        "contrastive_loss: 5 passages [5, 3] f32 cpu are not a multiple of 2 queries [2, 3] f32 cpu",
        "contrastive_loss: needs queries [Nq, D] and passages [Np, D], got [2, 3] f32 cpu and [4, 5] f32 cpu",
        "contrastive_loss: inputs of different dtypes: [2, 3] f16 cpu and [4, 3] f32 cpu",
        "contrastive_loss: temperature 0 is not positive and finite",
        "contrastive_loss: temperature -1 is not positive and finite",
        "contrastive_loss: temperature nan is not positive and finite",
        "contrastive_loss: temperature inf is not positive and finite",
        "contrastive_loss: needs i32 targets [2] for queries [2, 3] f32 cpu, got [1] i32 cpu",
        "contrastive_loss: target 9 at position 1 of targets [2] i32 cpu is outside [0, 4)",
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        gc_test_expect_fatal(contrastive_with, (void *)&cases[k], messages[k]);
    gc_test_expect_fatal(contrastive_no_options, NULL, "contrastive_loss: options is NULL");
    gc_test_expect_fatal(loss_fn_three_reps, NULL,
                         "contrastive_loss_fn: needs 2 representations (queries, passages), got 3");
}

int main(void) {
    test_cross_entropy_values();
    test_cross_entropy_extremes();
    test_contrastive_values();
    test_hard_negative_layout();
    test_temperature();
    test_contrastive_16_bit();
    test_contrastive_empty();
    test_gradients();
    test_gradient_16_bit();
    test_loss_fn();
    test_errors();
    return gc_test_result();
}
