/* What the tiled contrastive loss's CPU and CUDA tests share: the cases (every option of
 * the loss), the tolerances and the comparison with the untiled reference on the CPU. */
#ifndef GC_TESTS_LOSS_TILED_CASES_H
#define GC_TESTS_LOSS_TILED_CASES_H

#include "check.h"

/* f64: both compute the same sums of O(B + D) terms of order 1 (scores up to 1e4 at the
 * extreme temperature, whose exps the running max keeps below 1) in another order: a few
 * hundred roundings of 2^-53 relative to the largest term, far below 1e-12. */
#define F64_TOL 1e-12

static const gc_device cpu = {GC_DEVICE_CPU, 0};

typedef struct loss_case {
    const char *name;
    int64_t n_queries, n_passages, dim;
    const int32_t *targets; /* [n_queries], NULL: query i -> passage i (Np / Nq) */
    gc_similarity similarity;
    double temperature;
    gc_loss_reduction reduction;
    bool symmetric;
    double range; /* representations uniform in [-range, range) */
} loss_case;

/* The f32 tolerances, derived. A score s = (q . p) a b is a D-term dot product and two
 * products, so each computation holds it to within (D + 2) u |s|max (u = 2^-24, the f32
 * rounding; |s|max = D range^2 / T for dot, 1 / T for cosine, whose norms add a few u more).
 * An error e in the scores moves each term lse_i - s_i,t_i by at most 2e, so the loss by 2e
 * per term: Nq terms for a sum, one for a mean (with the two computations' errors: 4e). The
 * gradients depend on the scores through exp(s - lse), so an error e in them is a relative
 * error of about 2e in each probability, 4e between the two, 8 (D + 4) u |s|max relative to
 * the largest gradient element; the sums over up to B terms add roundings well below that.
 * A wrong term is off by O(1). (At the extreme temperature with dot scores of 2e5 the f32
 * bound says little, as f32 itself cannot resolve such scores: f64 checks that case.) */
static inline double largest_score(const loss_case *c) {
    double similarity = c->similarity == GC_SIMILARITY_COSINE ? 1.0 : (double)c->dim * c->range * c->range;
    return fmax(similarity / c->temperature, 1.0);
}

static inline double f32_value_tolerance(const loss_case *c) {
    double terms = c->reduction == GC_LOSS_SUM ? (double)c->n_queries : 1.0;
    return 4 * ((double)c->dim + 4) * 0x1p-24 * largest_score(c) * terms;
}

static inline double f32_gradient_tolerance(const loss_case *c) { return 8 * ((double)c->dim + 4) * 0x1p-24 * largest_score(c); }

static inline gc_contrastive_options options_of(const loss_case *c, const gc_tensor *targets, gc_contrastive_method method,
                                         int64_t tile) {
    return (gc_contrastive_options){.similarity = c->similarity,
                                    .temperature = c->temperature,
                                    .targets = targets,
                                    .reduction = c->reduction,
                                    .symmetric = c->symmetric,
                                    .method = method,
                                    .tile_size = tile};
}

/* max |got - want| / max(max |want|, floor) */
static inline double relative_difference(const gc_tensor *got, const gc_tensor *want, double floor) {
    gc_tensor *got64 = gc_cast(got, GC_F64), *want64 = gc_cast(want, GC_F64);
    gc_tensor *difference = gc_sub(got64, want64);
    REQUIRE(difference);
    double relative = gc_test_largest_abs(difference) / fmax(gc_test_largest_abs(want64), floor);
    RELEASE(got64, want64, difference);
    return relative;
}

typedef struct result {
    double value;
    gc_tensor *grads[2];
} result;

static inline result run(const gc_tensor *q, const gc_tensor *p, const gc_contrastive_options *options, bool tiled) {
    result r = {0};
    gc_status status = tiled ? gc_contrastive_loss_tiled(q, p, options, 1, &r.value, &r.grads[0], &r.grads[1])
                             : gc_contrastive_value_and_grad(q, p, options, 1, &r.value, &r.grads[0], &r.grads[1]);
    REQUIRE(status == GC_OK);
    for (int s = 0; s < 2; s++) {
        const gc_tensor *input = s ? p : q;
        REQUIRE(r.grads[s] && gc_same_shape(r.grads[s], input) && r.grads[s]->dtype == input->dtype);
    }
    return r;
}

static inline void release_result(result *r) { RELEASE(r->grads[0], r->grads[1]); }

/* x on `device` (a new reference). */
static inline gc_tensor *on(const gc_tensor *x, gc_device device) {
    gc_tensor *copy = x ? gc_to_device(x, device) : NULL;
    REQUIRE(!x || copy);
    return copy;
}

/* f16 and bf16 inputs: both losses compute in f32 and cast the gradients back, so they
 * differ by the f32 tolerance plus one rounding of the 16-bit result, at most one unit in
 * its last place (2^-7 relative for bf16, 2^-10 for f16) of the largest element. */
static inline double sixteen_bit_ulp(gc_dtype dtype) {
    return dtype == GC_BF16 ? 0x1p-7 : dtype == GC_F16 ? 0x1p-10 : 0;
}

/* The tiled loss at `tile` on `device` against the reference on the CPU, for inputs of
 * `dtype`. */
static inline void compare(const loss_case *c, gc_dtype dtype, int64_t tile, uint64_t seed, gc_device device) {
    gc_tensor *q = gc_test_random_in(GC_SHAPE(c->n_queries, c->dim), dtype, -c->range, c->range, seed);
    gc_tensor *p = gc_test_random_in(GC_SHAPE(c->n_passages, c->dim), dtype, -c->range, c->range, seed + 1);
    gc_tensor *targets = c->targets ? gc_from_host(c->targets, GC_SHAPE(c->n_queries), GC_I32, cpu) : NULL;
    REQUIRE(!c->targets || targets);
    gc_tensor *q_there = on(q, device), *p_there = on(p, device), *targets_there = on(targets, device);
    gc_contrastive_options full = options_of(c, targets, GC_CONTRASTIVE_FULL, 0);
    gc_contrastive_options tiled = options_of(c, targets_there, GC_CONTRASTIVE_TILED, tile);
    result want = run(q, p, &full, false), got = run(q_there, p_there, &tiled, true);
    for (int s = 0; s < 2; s++) { /* compared on the CPU */
        gc_tensor *there = got.grads[s];
        got.grads[s] = on(there, cpu);
        gc_tensor_release(there);
    }
    bool f64 = dtype == GC_F64;
    /* f64: relative to the loss, or to 1 where it is below (one pair: a loss of exactly 0) */
    double value_tol = f64 ? F64_TOL * fmax(fabs(want.value), 1.0) : f32_value_tolerance(c);
    double grad_tol = f64 ? F64_TOL : f32_gradient_tolerance(c) + sixteen_bit_ulp(dtype);
    double value_error = fabs(got.value - want.value);
    CHECK_MSG(value_error <= value_tol || (isnan(got.value) && isnan(want.value)),
              "%s, %s, tile %lld: loss %.17g, reference %.17g (off by %.3g > %.3g)", c->name, gc_dtype_name(dtype),
              (long long)tile, got.value, want.value, value_error, value_tol);
    for (int s = 0; s < 2; s++) {
        double error = relative_difference(got.grads[s], want.grads[s], 1e-30);
        CHECK_MSG(error <= grad_tol, "%s, %s, tile %lld: d loss / d %s off by %.3g of its largest element (> %.3g)",
                  c->name, gc_dtype_name(dtype), (long long)tile, s ? "passages" : "queries", error, grad_tol);
    }
    release_result(&want);
    release_result(&got);
    RELEASE(q, p, targets, q_there, p_there, targets_there);
}

/* Every option, each at tiles of 1 row, dividing the batch, not dividing it and larger
 * than it, in f64 and f32; and two in f16 and bf16. */
static inline void test_equal_to_reference(gc_device device) {
    static const int32_t unequal[5] = {12, 0, 7, 7, 3};  /* 5 queries, 13 passages, two share 7 */
    static const int32_t reversed[6] = {5, 4, 3, 2, 1, 0};
    const loss_case cases[] = {
        {"dot, in-batch", 6, 6, 5, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_MEAN, false, 1},
        {"cosine, in-batch", 6, 6, 5, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_MEAN, false, 1},
        {"cosine, sum", 6, 6, 5, NULL, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_SUM, false, 1},
        {"dot, 2 hard negatives", 4, 12, 3, NULL, GC_SIMILARITY_DOT, 1.0, GC_LOSS_SUM, false, 1},
        {"cosine, 2 hard negatives", 4, 12, 3, NULL, GC_SIMILARITY_COSINE, 0.2, GC_LOSS_MEAN, false, 1},
        {"cosine, explicit targets", 6, 6, 4, reversed, GC_SIMILARITY_COSINE, 0.07, GC_LOSS_MEAN, false, 1},
        {"dot, unequal counts, shared positive", 5, 13, 4, unequal, GC_SIMILARITY_DOT, 0.3, GC_LOSS_MEAN, false, 1},
        {"symmetric, dot", 6, 6, 5, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_MEAN, true, 1},
        {"symmetric, cosine, sum", 6, 6, 5, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_SUM, true, 1},
        {"symmetric, hard negatives", 4, 12, 3, NULL, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_MEAN, true, 1},
        {"symmetric, unequal counts", 5, 13, 4, unequal, GC_SIMILARITY_COSINE, 0.1, GC_LOSS_SUM, true, 1},
        {"one pair", 1, 1, 3, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_MEAN, true, 1},
        {"one query, 3 hard negatives", 1, 4, 3, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_MEAN, false, 1},
        /* scores up to 8 * 5^2 / 1e-3 = 2e5: exp overflows without the running max */
        {"temperature 1e-3, dot, large scores", 6, 6, 8, NULL, GC_SIMILARITY_DOT, 1e-3, GC_LOSS_MEAN, true, 5},
        {"temperature 1e-3, cosine", 6, 12, 8, NULL, GC_SIMILARITY_COSINE, 1e-3, GC_LOSS_SUM, true, 1},
        /* the mean of no terms is nan in both; the sum is 0 with zero gradients */
        {"no queries, mean", 0, 4, 3, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_MEAN, false, 1},
        {"no queries, sum, symmetric", 0, 4, 3, NULL, GC_SIMILARITY_COSINE, 0.5, GC_LOSS_SUM, true, 1},
    };
    const int64_t tiles[] = {1, 2, 4, 5, 1000};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
            compare(&cases[k], GC_F64, tiles[t], 10 * k + 1, device);
            compare(&cases[k], GC_F32, tiles[t], 10 * k + 1, device);
        }
    for (size_t k = 1; k < sizeof cases / sizeof *cases; k += 8) { /* cosine; symmetric with hard negatives */
        compare(&cases[k], GC_F16, 4, 10 * k + 1, device);
        compare(&cases[k], GC_BF16, 4, 10 * k + 1, device);
    }
}

#endif
