/* The tiled contrastive loss (gc_contrastive_loss_tiled) against the untiled reference
 * differentiated by autograd (gc_contrastive_value_and_grad with GC_CONTRASTIVE_FULL): the
 * value and both gradients for every option (dot and cosine, temperatures down to 1e-3 with
 * scores in the thousands, default and explicit targets, hard negatives, unequal counts,
 * duplicate positives, mean and sum, one- and two-directional) at tile sizes that divide the
 * batch, that do not, of one row, and larger than the batch; f16 and bf16 inputs; no
 * queries; the automatic choice of method; bad input; a GradCache step through the tiled
 * loss against the plain step; and the working memory at batch 16,384. */
#include "check.h"
#include "mlp_encoder.h"

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
static double largest_score(const loss_case *c) {
    double similarity = c->similarity == GC_SIMILARITY_COSINE ? 1.0 : (double)c->dim * c->range * c->range;
    return fmax(similarity / c->temperature, 1.0);
}

static double f32_value_tolerance(const loss_case *c) {
    double terms = c->reduction == GC_LOSS_SUM ? (double)c->n_queries : 1.0;
    return 4 * ((double)c->dim + 4) * 0x1p-24 * largest_score(c) * terms;
}

static double f32_gradient_tolerance(const loss_case *c) { return 8 * ((double)c->dim + 4) * 0x1p-24 * largest_score(c); }

static gc_contrastive_options options_of(const loss_case *c, const gc_tensor *targets, gc_contrastive_method method,
                                         int64_t tile) {
    return (gc_contrastive_options){.similarity = c->similarity,
                                    .temperature = c->temperature,
                                    .targets = targets,
                                    .reduction = c->reduction,
                                    .symmetric = c->symmetric,
                                    .method = method,
                                    .tile_size = tile};
}

static double max_abs(const gc_tensor *t) {
    int64_t n = gc_numel(t);
    double *values = malloc(sizeof(double) * (size_t)(n ? n : 1)), largest = 0;
    REQUIRE(values);
    gc_to_host_f64(t, values);
    for (int64_t i = 0; i < n; i++) largest = fmax(largest, fabs(values[i]));
    free(values);
    return largest;
}

/* max |got - want| / max(max |want|, floor) */
static double relative_difference(const gc_tensor *got, const gc_tensor *want, double floor) {
    gc_tensor *got64 = gc_cast(got, GC_F64), *want64 = gc_cast(want, GC_F64);
    gc_tensor *difference = gc_sub(got64, want64);
    REQUIRE(difference);
    double relative = max_abs(difference) / fmax(max_abs(want64), floor);
    RELEASE(got64, want64, difference);
    return relative;
}

typedef struct result {
    double value;
    gc_tensor *grads[2];
} result;

static result run(const gc_tensor *q, const gc_tensor *p, const gc_contrastive_options *options, bool tiled) {
    result r = {0};
    gc_status status = tiled ? gc_contrastive_loss_tiled(q, p, options, &r.value, &r.grads[0], &r.grads[1])
                             : gc_contrastive_value_and_grad(q, p, options, &r.value, &r.grads[0], &r.grads[1]);
    REQUIRE(status == GC_OK);
    for (int s = 0; s < 2; s++) {
        const gc_tensor *input = s ? p : q;
        REQUIRE(r.grads[s] && gc_same_shape(r.grads[s], input) && r.grads[s]->dtype == input->dtype);
    }
    return r;
}

static void release_result(result *r) { RELEASE(r->grads[0], r->grads[1]); }

/* The tiled loss at `tile` against the reference, for inputs of `dtype`. */
static void compare(const loss_case *c, gc_dtype dtype, int64_t tile, uint64_t seed) {
    gc_tensor *q = gc_test_random_in(GC_SHAPE(c->n_queries, c->dim), dtype, -c->range, c->range, seed);
    gc_tensor *p = gc_test_random_in(GC_SHAPE(c->n_passages, c->dim), dtype, -c->range, c->range, seed + 1);
    gc_tensor *targets = c->targets ? gc_from_host(c->targets, GC_SHAPE(c->n_queries), GC_I32, cpu) : NULL;
    REQUIRE(!c->targets || targets);
    gc_contrastive_options full = options_of(c, targets, GC_CONTRASTIVE_FULL, 0);
    gc_contrastive_options tiled = options_of(c, targets, GC_CONTRASTIVE_TILED, tile);
    result want = run(q, p, &full, false), got = run(q, p, &tiled, true);
    bool f64 = dtype == GC_F64;
    /* f64: relative to the loss, or to 1 where it is below (one pair: a loss of exactly 0) */
    double value_tol = f64 ? F64_TOL * fmax(fabs(want.value), 1.0) : f32_value_tolerance(c);
    double grad_tol = f64 ? F64_TOL : f32_gradient_tolerance(c);
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
    RELEASE(q, p, targets);
}

/* Every option, each at tiles of 1 row, dividing the batch, not dividing it and larger
 * than it, in f64 and f32. */
static void test_equal_to_reference(void) {
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
            compare(&cases[k], GC_F64, tiles[t], 10 * k + 1);
            compare(&cases[k], GC_F32, tiles[t], 10 * k + 1);
        }
}

/* f16 and bf16 inputs: both losses compute in f32 and cast the gradients back, so they
 * differ by the f32 tolerance plus one rounding of the 16-bit result, at most one unit in
 * its last place (2^-7 relative for bf16, 2^-10 for f16) of the largest element. */
static void test_16_bit(void) {
    const loss_case cases[] = {
        {"cosine, 16-bit", 6, 6, 5, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_MEAN, false, 1},
        {"symmetric, hard negatives, 16-bit", 4, 12, 3, NULL, GC_SIMILARITY_DOT, 0.5, GC_LOSS_SUM, true, 1},
    };
    const gc_dtype dtypes[2] = {GC_F16, GC_BF16};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int d = 0; d < 2; d++) {
            const loss_case *c = &cases[k];
            gc_tensor *q = gc_test_random_in(GC_SHAPE(c->n_queries, c->dim), dtypes[d], -1, 1, 70 + k);
            gc_tensor *p = gc_test_random_in(GC_SHAPE(c->n_passages, c->dim), dtypes[d], -1, 1, 80 + k);
            gc_contrastive_options full = options_of(c, NULL, GC_CONTRASTIVE_FULL, 0);
            gc_contrastive_options tiled = options_of(c, NULL, GC_CONTRASTIVE_TILED, 4);
            result want = run(q, p, &full, false), got = run(q, p, &tiled, true);
            double ulp = dtypes[d] == GC_BF16 ? 0x1p-7 : 0x1p-10;
            CHECK_MSG(fabs(got.value - want.value) <= f32_value_tolerance(c), "%s, %s: loss %.9g, reference %.9g",
                      c->name, gc_dtype_name(dtypes[d]), got.value, want.value);
            for (int s = 0; s < 2; s++) {
                double error = relative_difference(got.grads[s], want.grads[s], 1e-30);
                CHECK_MSG(error <= f32_gradient_tolerance(c) + ulp, "%s, %s: gradient %d off by %.3g", c->name,
                          gc_dtype_name(dtypes[d]), s, error);
            }
            release_result(&want);
            release_result(&got);
            RELEASE(q, p);
        }
}

/* The bytes the call allocates beyond what was live before it, at its peak. */
static size_t working_bytes(const gc_tensor *q, const gc_tensor *p, const gc_contrastive_options *options) {
    gc_memory_stats before = gc_memory_get_stats(cpu);
    gc_memory_reset_peak(cpu);
    result r = run(q, p, options, false);
    size_t peak = gc_memory_get_stats(cpu).peak_bytes;
    release_result(&r);
    return peak - before.live_bytes;
}

/* GC_CONTRASTIVE_AUTO tiles when a side has more rows than a tile: the 64 x 64 scores
 * (16 KiB) then never exist. Also what the gc_loss_fn offers GradCache. */
static void test_automatic_choice(void) {
    gc_tensor *q = gc_test_random(GC_SHAPE(64, 2), GC_F32, 90), *p = gc_test_random(GC_SHAPE(64, 2), GC_F32, 91);
    size_t matrix = 64 * 64 * sizeof(float);
    gc_contrastive_options one_tile = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .tile_size = 64};
    gc_contrastive_options many_tiles = one_tile;
    many_tiles.tile_size = 8;
    size_t untiled = working_bytes(q, p, &one_tile), tiled = working_bytes(q, p, &many_tiles);
    CHECK_MSG(untiled >= matrix, "auto, batch = tile: %zu bytes, less than the %zu of the scores (not the full loss?)",
              untiled, matrix);
    CHECK_MSG(tiled < matrix / 4, "auto, batch 8 tiles: %zu bytes (the full loss?)", tiled);
    gc_contrastive_options forced = many_tiles;
    forced.method = GC_CONTRASTIVE_FULL;
    CHECK_MSG(working_bytes(q, p, &forced) >= matrix, "GC_CONTRASTIVE_FULL did not build the scores");
    CHECK(gc_contrastive_loss_fn(&many_tiles).value_and_grad != NULL);
    RELEASE(q, p);
}

/* Batch 16,384 of 32-wide f32 representations (the benchmark model's width): the loss's
 * working memory, all it allocates including the two gradients it returns (4 MiB), stays
 * under 1% of one B x B f32 matrix (1 GiB); without the gradients it is one default tile of
 * scores and a few numbers per row. */
static void test_memory_at_16384(void) {
    const int64_t batch = 16384, dim = 32;
    gc_tensor *q = gc_test_random(GC_SHAPE(batch, dim), GC_F32, 92), *p = gc_test_random(GC_SHAPE(batch, dim), GC_F32, 93);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    size_t working = working_bytes(q, p, &options), matrix = (size_t)(batch * batch) * sizeof(float);
    size_t gradients = 2 * (size_t)(batch * dim) * sizeof(float);
    size_t tile = (size_t)(GC_CONTRASTIVE_TILE_CPU * GC_CONTRASTIVE_TILE_CPU) * sizeof(float);
    CHECK_MSG(working < matrix / 100, "batch %lld: the loss allocates %zu bytes, 1%% of the scores is %zu",
              (long long)batch, working, matrix / 100);
    /* per row: inverse norm, scale, max, sum, lse, target score, target (and a few temporaries) */
    CHECK_MSG(working - gradients <= tile + 16 * (size_t)batch * sizeof(float),
              "batch %lld: %zu bytes besides the gradients, more than a tile and 16 numbers per row",
              (long long)batch, working - gradients);
    RELEASE(q, p);
}

/* --- bad input --- */

/* A non-finite representation: GC_ERR_NON_FINITE naming the side and the row, no gradients.
 * Finite representations whose scores overflow: the same status, naming the temperature. */
static void expect_non_finite(const gc_tensor *q, const gc_tensor *p, const char *message, bool bad_input) {
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.1, .tile_size = 2};
    double value = 0;
    gc_tensor *grads[2] = {NULL, NULL};
    gc_clear_error();
    gc_status status = gc_contrastive_loss_tiled(q, p, &options, &value, &grads[0], &grads[1]);
    CHECK_MSG(status == GC_ERR_NON_FINITE && !grads[0] && !grads[1], "status %s", gc_status_name(status));
    CHECK_MSG(strstr(gc_last_error(), message), "the error '%s' does not say '%s'", gc_last_error(), message);
    gc_clear_error();
    if (bad_input) { /* the reference refuses it too (an overflow it returns as an inf or a nan) */
        CHECK(gc_contrastive_loss(q, p, &options) == NULL && gc_last_status() == GC_ERR_NON_FINITE);
        gc_clear_error();
    }
}

static void test_non_finite(void) {
    size_t live = gc_memory_get_stats(cpu).live_bytes;
    double values[6 * 4];
    for (int i = 0; i < 24; i++) values[i] = 0.1 * (i % 7) - 0.3;
    gc_tensor *q = gc_from_host(values, GC_SHAPE(6, 4), GC_F64, cpu);
    values[3 * 4 + 2] = NAN;
    gc_tensor *p_nan = gc_from_host(values, GC_SHAPE(6, 4), GC_F64, cpu);
    values[3 * 4 + 2] = 0;
    values[1 * 4] = -INFINITY;
    gc_tensor *q_inf = gc_from_host(values, GC_SHAPE(6, 4), GC_F64, cpu);
    for (int i = 0; i < 24; i++) values[i] = 1e200;
    gc_tensor *huge = gc_from_host(values, GC_SHAPE(6, 4), GC_F64, cpu);
    REQUIRE(q && p_nan && q_inf && huge);
    size_t inputs = gc_memory_get_stats(cpu).live_bytes;
    expect_non_finite(q, p_nan, "passage row 3 of [6, 4] f64 cpu holds an inf or a nan", true);
    expect_non_finite(q_inf, q, "query row 1 of [6, 4] f64 cpu holds an inf or a nan", true);
    expect_non_finite(huge, huge, "the scores overflow at temperature 0.1", false);
    CHECK_MSG(gc_memory_get_stats(cpu).live_bytes == inputs, "a failed loss left %zu bytes behind",
              gc_memory_get_stats(cpu).live_bytes - inputs);
    RELEASE(q, p_nan, q_inf, huge);
    CHECK(gc_memory_get_stats(cpu).live_bytes == live);
}

typedef struct bad_call {
    int64_t passage_dim, tile;
} bad_call;

static void tiled_with(void *arg) {
    const bad_call *b = arg;
    gc_tensor *q = gc_zeros(GC_SHAPE(4, 3), GC_F32, cpu), *p = gc_zeros(GC_SHAPE(4, b->passage_dim), GC_F32, cpu);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 1, .tile_size = b->tile};
    double value;
    gc_tensor *gq, *gp;
    gc_contrastive_loss_tiled(q, p, &options, &value, &gq, &gp);
}

static void test_bad_arguments(void) {
    gc_test_expect_fatal(tiled_with, &(bad_call){5, 2},
                         "contrastive_loss: needs queries [Nq, D] and passages [Np, D], got [4, 3] f32 cpu and [4, 5] "
                         "f32 cpu");
    gc_test_expect_fatal(tiled_with, &(bad_call){3, -1}, "contrastive_loss: tile size -1 is not positive");
}

/* --- through GradCache --- */

static gc_tensor *encode(void *model, const gc_batch *input) { return encoder_forward(model, input); }

/* One cached step (chunks of 3 and 5 rows, the loss tiled by 4) against the plain step with
 * the untiled loss: the same parameter gradients to f64 rounding (a few hundred roundings of
 * 2^-53: 1e-10 leaves a wide margin, a wrong term is O(1)). A nan in an input row stops the
 * step with GC_ERR_NON_FINITE and leaves the gradients as they were. */
static void test_gradcache_step(void) {
    mlp_encoder q = make_encoder(GC_F64, 40, 0), p = make_encoder(GC_F64, 50, 0);
    mlp_encoder ref_q = make_encoder(GC_F64, 40, 0), ref_p = make_encoder(GC_F64, 50, 0);
    gc_tensor *xq = gc_uniform(GC_SHAPE(10, IN), GC_F64, cpu, -1, 1, 60, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(20, IN), GC_F64, cpu, -1, 1, 61, 0); /* 1 hard negative each */
    REQUIRE(xq && xp);
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_contrastive_options tiled = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .symmetric = true,
                                    .method = GC_CONTRASTIVE_TILED, .tile_size = 4};
    gc_contrastive_options full = tiled;
    full.method = GC_CONTRASTIVE_FULL;
    gc_cache_config config = {.n_models = 2,
                              .models = {{&q, encode, 3, &q.params}, {&p, encode, 5, &p.params}},
                              .loss = gc_contrastive_loss_fn(&tiled)};
    gc_cache_config ref_config = {.n_models = 2,
                                  .models = {{&ref_q, encode, 10, &ref_q.params}, {&ref_p, encode, 20, &ref_p.params}},
                                  .loss = gc_contrastive_loss_fn(&full)};
    gc_cache *cache = gc_cache_new(&config), *ref_cache = gc_cache_new(&ref_config);
    double loss, ref_loss;
    REQUIRE(gc_cache_step(cache, inputs, &loss, NULL) == GC_OK);
    REQUIRE(gc_cache_full_batch_step(ref_cache, inputs, &ref_loss) == GC_OK);
    CHECK_MSG(fabs(loss - ref_loss) <= 1e-10 * fabs(ref_loss), "loss %.17g, plain step %.17g", loss, ref_loss);
    int64_t n;
    double *got = collect_grads((mlp_encoder *[]){&q, &p}, 2, &n);
    double *want = collect_grads((mlp_encoder *[]){&ref_q, &ref_p}, 2, &n);
    CHECK_MSG(relative_error(got, want, n) <= 1e-10, "parameter gradients off by %.3g", relative_error(got, want, n));
    free(want);

    double *row = gc_data(xp);
    row[7 * IN + 1] = NAN; /* passage 7 */
    gc_clear_error();
    CHECK_MSG(gc_cache_step(cache, inputs, &loss, NULL) == GC_ERR_NON_FINITE, "a nan input: %s", gc_last_error());
    CHECK_MSG(strstr(gc_last_error(), "passage row 7 of"), "the error '%s' does not name passage row 7",
              gc_last_error());
    gc_clear_error();
    double *after = collect_grads((mlp_encoder *[]){&q, &p}, 2, &n);
    CHECK_MSG(memcmp(got, after, (size_t)n * sizeof *got) == 0, "the failed step changed the gradients");
    free(got);
    free(after);
    gc_cache_free(cache);
    gc_cache_free(ref_cache);
    mlp_encoder *encoders[] = {&q, &p, &ref_q, &ref_p};
    for (int e = 0; e < 4; e++) free_encoder(encoders[e]);
    RELEASE(xq, xp);
}

int main(void) {
    test_equal_to_reference();
    test_16_bit();
    test_automatic_choice();
    test_non_finite();
    test_bad_arguments();
    test_gradcache_step();
    test_memory_at_16384();
    return gc_test_result();
}
