/* The tiled contrastive loss (gc_contrastive_loss_tiled) against the untiled reference
 * differentiated by autograd (gc_contrastive_value_and_grad with GC_CONTRASTIVE_FULL): the
 * value and both gradients for every option (dot and cosine, temperatures down to 1e-3 with
 * scores in the thousands, default and explicit targets, hard negatives, unequal counts,
 * duplicate positives, mean and sum, one- and two-directional) at tile sizes that divide the
 * batch, that do not, of one row, and larger than the batch; f16 and bf16 inputs; no
 * queries; the automatic choice of method; bad input; a GradCache step through the tiled
 * loss against the plain step; and the working memory at batch 16,384. */
#include "loss_tiled_cases.h"
#include "mlp_encoder.h"

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

/* A non-finite representation: GC_ERR_NON_FINITE naming the side and the row, no gradients,
 * from the tiled loss and from the reference's value_and_grad (both read the inputs back only
 * after the loss came out non-finite). Finite representations whose scores overflow: the
 * same status, naming the temperature. */
static void expect_non_finite(const gc_tensor *q, const gc_tensor *p, const char *message, bool bad_input) {
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.1, .tile_size = 2};
    double value = 0;
    gc_tensor *grads[2] = {NULL, NULL};
    gc_clear_error();
    gc_status status = gc_contrastive_loss_tiled(q, p, &options, 1, &value, &grads[0], &grads[1]);
    CHECK_MSG(status == GC_ERR_NON_FINITE && !grads[0] && !grads[1], "status %s", gc_status_name(status));
    CHECK_MSG(strstr(gc_last_error(), message), "the error '%s' does not say '%s'", gc_last_error(), message);
    gc_clear_error();
    if (bad_input) { /* the reference's forward reads nothing back: its loss is a nan, as PyTorch's */
        gc_tensor *loss = gc_contrastive_loss(q, p, &options);
        CHECK(loss && isnan(gc_item(loss)) && gc_last_status() == GC_OK);
        gc_tensor_release(loss);
    }
    /* the reference's value_and_grad names the row as the tiled loss does */
    options.method = GC_CONTRASTIVE_FULL;
    status = gc_contrastive_value_and_grad(q, p, &options, 1, &value, &grads[0], &grads[1]);
    CHECK_MSG(status == GC_ERR_NON_FINITE && !grads[0] && !grads[1], "full: status %s", gc_status_name(status));
    CHECK_MSG(strstr(gc_last_error(), message), "full: the error '%s' does not say '%s'", gc_last_error(), message);
    gc_clear_error();
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
    gc_contrastive_loss_tiled(q, p, &options, 1, &value, &gq, &gp);
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

/* The seed (a loss scale) multiplies the gradients in f32, before they are rounded to f16:
 * with a mean over 512 rows of tiny representations, every
 * gradient element is below f16's smallest subnormal (2^-24) unscaled, so without the seed
 * inside they would all flush to zero. Both methods, seeded by 2^16, give 2^16 times the f32
 * gradient to one f16 rounding (2^-10 relative, with the f32 tolerance below it). */
static void test_seed_before_rounding(void) {
    const int64_t rows = 512, dim = 8;
    const double scale = 65536;
    gc_tensor *q32 = gc_test_random_in(GC_SHAPE(rows, dim), GC_F32, -1e-5, 1e-5, 70);
    gc_tensor *p32 = gc_test_random_in(GC_SHAPE(rows, dim), GC_F32, -1e-5, 1e-5, 71);
    gc_tensor *q16 = gc_cast(q32, GC_F16), *p16 = gc_cast(p32, GC_F16);
    gc_tensor *q_back = gc_cast(q16, GC_F32), *p_back = gc_cast(p16, GC_F32);
    REQUIRE(q16 && p16 && q_back && p_back);
    for (int method = GC_CONTRASTIVE_TILED; method <= GC_CONTRASTIVE_FULL; method++) {
        gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 1,
                                          .method = (gc_contrastive_method)method, .tile_size = 128};
        double value, value32;
        gc_tensor *gq = NULL, *gp = NULL, *gq32 = NULL, *gp32 = NULL;
        REQUIRE(gc_contrastive_value_and_grad(q16, p16, &options, scale, &value, &gq, &gp) == GC_OK);
        REQUIRE(gc_contrastive_value_and_grad(q_back, p_back, &options, 1, &value32, &gq32, &gp32) == GC_OK);
        CHECK_MSG(gq->dtype == GC_F16 && gp->dtype == GC_F16, "the gradients are not f16");
        CHECK_MSG(gc_test_largest_abs(gq32) < 0x1p-24, "the test needs unscaled gradients below f16's range, got %g",
                  gc_test_largest_abs(gq32));
        gc_tensor *want_q = gc_mul_scalar(gq32, scale), *want_p = gc_mul_scalar(gp32, scale);
        double dq = relative_difference(gq, want_q, 0), dp = relative_difference(gp, want_p, 0);
        CHECK_MSG(dq <= 2 * 0x1p-10 && dp <= 2 * 0x1p-10, "method %d: the seeded gradients are off by %g and %g",
                  method, dq, dp);
        CHECK_MSG(fabs(value - value32) <= 1e-6 * fabs(value32), "method %d: the seed changed the loss: %g, not %g",
                  method, value, value32);
        RELEASE(gq, gp, gq32, gp32, want_q, want_p);
    }
    RELEASE(q32, p32, q16, p16, q_back, p_back);
}

int main(void) {
    test_equal_to_reference(cpu);
    test_automatic_choice();
    test_non_finite();
    test_bad_arguments();
    test_gradcache_step();
    test_seed_before_rounding();
    test_memory_at_16384();
    return gc_test_result();
}
