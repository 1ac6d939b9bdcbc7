/* GradCache in half precision and with loss scaling: f16 and bf16 cached gradients against
 * the full-batch step (to the rounding of the type: bitwise with two chunks per model) and
 * against f32 (a derived tolerance); a loss scaler applied exactly once, whatever the
 * backward function or the loss; gradients that f16 would flush to zero kept by the scale;
 * an overflow in one chunk skipping the whole step; and the second pass held to the first
 * pass's precision. Dropout is on throughout, so the replayed masks are checked too. */
#include "check.h"
#include "mlp_encoder.h"

#define ROWS 12

static double unit_roundoff(gc_dtype dtype) {
    return dtype == GC_F16 ? ldexp(1, -11) : dtype == GC_BF16 ? ldexp(1, -8) : ldexp(1, -24);
}

/* Two MLP towers and a batch of ROWS query/passage pairs, with the cosine InfoNCE loss. */
typedef struct setup {
    mlp_encoder q, p;
    gc_tensor *xq, *xp; /* [ROWS, IN] */
    gc_batch inputs[2];
    gc_contrastive_options options;
    double loss_factor; /* the loss is multiplied by it (1, or tiny to test underflow) */
} setup;

static void finish_setup(setup *s) {
    REQUIRE(s->xq && s->xp);
    s->inputs[0] = (gc_batch){1, {"x"}, {s->xq}};
    s->inputs[1] = (gc_batch){1, {"x"}, {s->xp}};
    s->options = (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE, .temperature = 0.5, .reduction = GC_LOSS_MEAN};
    s->loss_factor = 1;
}

static setup make_setup(gc_dtype dtype) {
    setup s = {.q = make_encoder(dtype, 10, 0.1), .p = make_encoder(dtype, 20, 0.1)};
    s.xq = gc_uniform(GC_SHAPE(ROWS, IN), dtype, gc_cpu(), -1, 1, 30, 0);
    s.xp = gc_uniform(GC_SHAPE(ROWS, IN), dtype, gc_cpu(), -1, 1, 31, 0);
    finish_setup(&s);
    return s;
}

/* The same weights and inputs in another dtype. */
static setup cast_setup(const setup *from, gc_dtype dtype) {
    setup s = {.q = cast_encoder(&from->q, dtype), .p = cast_encoder(&from->p, dtype)};
    s.xq = gc_cast(from->xq, dtype);
    s.xp = gc_cast(from->xp, dtype);
    finish_setup(&s);
    s.loss_factor = from->loss_factor;
    return s;
}

static void free_setup(setup *s) {
    free_encoder(&s->q);
    free_encoder(&s->p);
    RELEASE(s->xq, s->xp);
}

/* The contrastive loss times the setup's factor (gc_loss_fn.forward; args: the setup). */
static gc_tensor *scaled_contrastive(gc_tensor *const *reps, int count, void *args) {
    const setup *s = args;
    REQUIRE(count == 2);
    gc_tensor *loss = gc_contrastive_loss(reps[0], reps[1], &s->options);
    if (s->loss_factor == 1) return loss;
    gc_tensor *scaled = gc_mul_scalar(loss, s->loss_factor);
    gc_tensor_release(loss);
    return scaled;
}

static gc_cache_config make_config(setup *s, int64_t chunk, const gc_loss_scaler *scaler) {
    return (gc_cache_config){.n_models = 2,
                             .models = {{&s->q, encoder_forward, chunk, &s->q.params},
                                        {&s->p, encoder_forward, chunk, &s->p.params}},
                             .loss = {.forward = scaled_contrastive, .args = s},
                             .keep_last_graph = true,
                             .scaler = scaler};
}

/* The parameter gradients of one step (cached or full-batch) from dropout seed 7, as one f64
 * vector; the loss into *loss when not NULL. */
static double *step_grads(setup *s, const gc_cache_config *config, bool cached, int64_t *n, double *loss) {
    gc_param_list_zero_grad(&s->q.params);
    gc_param_list_zero_grad(&s->p.params);
    gc_cache *cache = gc_cache_new(config);
    gc_manual_seed(7);
    double value;
    gc_cache_report report;
    REQUIRE((cached ? gc_cache_step(cache, s->inputs, &value, &report) : gc_cache_full_batch_step(cache, s->inputs, &value)) ==
            GC_OK);
    if (cached) CHECK(report.loss_scale == (config->scaler ? config->scaler->scale : 1));
    if (loss) *loss = value;
    gc_cache_free(cache);
    mlp_encoder *encoders[2] = {&s->q, &s->p};
    return collect_grads(encoders, 2, n);
}

/* --- half precision against the full batch --- */

/* The chunk contributions to one parameter's gradient, measured by a post-accumulate hook
 * (it fires after each chunk's backward with the sum so far): sum over chunks of ||g_c||. */
typedef struct contributions {
    bool active;
    int64_t numel;
    double previous[IN * HIDDEN];
    double norms; /* sum of ||g_c|| */
} contributions;

static void record_contribution(gc_tensor *leaf, void *data) {
    contributions *c = data;
    if (!c->active) return;
    double now[IN * HIDDEN], square = 0;
    gc_to_host_f64(gc_grad(leaf), now);
    for (int64_t i = 0; i < c->numel; i++) {
        square += (now[i] - c->previous[i]) * (now[i] - c->previous[i]);
        c->previous[i] = now[i];
    }
    c->norms += sqrt(square);
}

/* With two chunks per model the cached step adds a + b where the full batch adds b + a: the
 * same rounding, so the gradients are equal bit for bit. With k chunks the two sum k terms
 * in opposite orders; each order is within gamma_(k-1) sum_c |g_c| of the exact sum (the
 * recursive summation bound, gamma_n = n u / (1 - n u)), so per parameter
 *     ||cached - full|| <= 2 gamma_(k-1) sum_c ||g_c||,
 * with sum_c ||g_c|| measured here by a hook. */
static void test_half_equals_full_batch(gc_dtype dtype) {
    setup s = make_setup(dtype);
    int64_t n;
    gc_cache_config two = make_config(&s, ROWS / 2, NULL);
    double *cached = step_grads(&s, &two, true, &n, NULL), *full = step_grads(&s, &two, false, &n, NULL);
    CHECK_MSG(memcmp(cached, full, (size_t)n * sizeof *cached) == 0, "%s, 2 chunks: gradients differ (relative %.3g)",
              gc_dtype_name(dtype), relative_error(cached, full, n));
    free(cached);
    free(full);

    const int k = 4;
    gc_cache_config four = make_config(&s, ROWS / k, NULL);
    contributions *tracked[6];
    mlp_encoder *encoders[2] = {&s.q, &s.p};
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 3; i++) {
            contributions *c = tracked[3 * e + i] = calloc(1, sizeof *c);
            REQUIRE(c);
            c->numel = gc_numel(encoders[e]->params.items[i].tensor);
            gc_add_post_accumulate_hook(encoders[e]->params.items[i].tensor, record_contribution, c);
            c->active = true;
        }
    cached = step_grads(&s, &four, true, &n, NULL);
    for (int t = 0; t < 6; t++) tracked[t]->active = false;
    full = step_grads(&s, &four, false, &n, NULL);
    double gamma = (k - 1) * unit_roundoff(dtype) / (1 - (k - 1) * unit_roundoff(dtype));
    int64_t at = 0;
    for (int t = 0; t < 6; t++) {
        int64_t numel = tracked[t]->numel;
        double diff = 0;
        for (int64_t i = at; i < at + numel; i++) diff += (cached[i] - full[i]) * (cached[i] - full[i]);
        double bound = 2 * gamma * tracked[t]->norms;
        CHECK_MSG(sqrt(diff) <= bound, "%s, %d chunks, parameter %d: ||cached - full|| %.3g > bound %.3g",
                  gc_dtype_name(dtype), k, t, sqrt(diff), bound);
        at += numel;
    }
    fprintf(stderr, "%s, %d chunks: cached against full batch, relative %.3g\n", gc_dtype_name(dtype), k,
            relative_error(cached, full, n));
    for (int t = 0; t < 6; t++) free(tracked[t]);
    free(cached);
    free(full);
    free_setup(&s);
}

/* --- half precision against f32 ---
 * The same weights and inputs (the 16-bit values, widened), the same masks. The f16/bf16
 * step rounds every op's result to the type: on the longest path of this model (a weight's
 * gradient in the first layer) 5 roundings forward (matmul, bias, tanh, dropout, matmul), the
 * cache's 1, and some 8 backward (the seed's slice, matmul, dropout, tanh's derivative in 3
 * ops, matmul, the accumulation): 14 roundings of relative size u, adding up to at most 14u
 * at a condition number of 1. The loss's own sensitivity (cosine scores at temperature 0.5
 * amplify an error in a representation about 2-fold) makes it 28u; we allow 32u: 1.6% for
 * f16, 12.5% for bf16. A dropped chunk or a wrong mask is off by tens of percent. */
#define HALF_AGAINST_F32_ROUNDINGS 32

static double half_against_f32(setup *half, const gc_loss_scaler *scaler) {
    setup full = cast_setup(half, GC_F32);
    int64_t n;
    gc_cache_config half_config = make_config(half, 4, scaler), full_config = make_config(&full, 4, NULL);
    double *got = step_grads(half, &half_config, true, &n, NULL), *want = step_grads(&full, &full_config, true, &n, NULL);
    if (scaler)
        for (int64_t i = 0; i < n; i++) got[i] /= scaler->scale;
    double error = relative_error(got, want, n);
    free(got);
    free(want);
    free_setup(&full);
    return error;
}

static void test_half_against_f32(gc_dtype dtype) {
    setup s = make_setup(dtype);
    double error = half_against_f32(&s, NULL), tolerance = HALF_AGAINST_F32_ROUNDINGS * unit_roundoff(dtype);
    fprintf(stderr, "%s against f32: relative %.3g (tolerance %.3g)\n", gc_dtype_name(dtype), error, tolerance);
    CHECK_MSG(error <= tolerance, "%s against f32: relative %.3g > %.3g", gc_dtype_name(dtype), error, tolerance);
    free_setup(&s);
}

/* A loss 2^-24 of the usual one gives f16 gradients below f16's smallest subnormal: they
 * flush to zero, far from f32's. Scaled by 2^24 they are back in range, and unscaled they
 * meet f32 to the tolerance above. */
static void test_scale_keeps_f16_gradients(void) {
    setup s = make_setup(GC_F16);
    s.loss_factor = ldexp(1, -24);
    double unscaled = half_against_f32(&s, NULL);
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = ldexp(1, 24);
    double scaled = half_against_f32(&s, &scaler), tolerance = HALF_AGAINST_F32_ROUNDINGS * unit_roundoff(GC_F16);
    fprintf(stderr, "f16, loss x 2^-24: against f32 %.3g unscaled, %.3g scaled by 2^24\n", unscaled, scaled);
    CHECK_MSG(unscaled > 0.5, "f16 without a scale kept gradients of 2^-24 (relative error %.3g)", unscaled);
    CHECK_MSG(scaled <= tolerance, "f16 scaled by 2^24: relative %.3g > %.3g", scaled, tolerance);
    free_setup(&s);
}

/* --- the scale applied once --- */

/* A backward function that records the seeds it is given and back-propagates them as given. */
typedef struct recorder {
    int calls;
    double loss_seed; /* the value of the first seed of one element (the loss's), or 0 */
} recorder;

static gc_status recording_backward(gc_tensor *output, gc_tensor *seed, void *user) {
    recorder *r = user;
    r->calls++;
    if (gc_numel(output) == 1 && r->loss_seed == 0) r->loss_seed = seed ? gc_item(seed) : 1;
    return gc_backward(&output, seed ? &seed : NULL, 1);
}

/* The loss through value_and_grad: the same contrastive loss on copies of the leaves,
 * back-propagated from `seed` (gc_loss_fn.value_and_grad; args: the setup). */
static gc_status contrastive_value_and_grad(gc_tensor *const *reps, int count, void *args, double seed, double *value,
                                            gc_tensor **grads) {
    gc_tensor *copies[2];
    for (int i = 0; i < count; i++) {
        copies[i] = gc_clone(reps[i]);
        REQUIRE(copies[i]);
        gc_set_requires_grad(copies[i], true);
    }
    gc_tensor *loss = scaled_contrastive(copies, count, args);
    gc_tensor *seed_tensor = gc_full(loss->ndim, loss->shape, loss->dtype, loss->device, seed);
    REQUIRE(loss && seed_tensor && gc_backward(&loss, &seed_tensor, 1) == GC_OK);
    *value = gc_item(loss);
    for (int i = 0; i < count; i++) grads[i] = gc_clone(gc_grad(copies[i]));
    RELEASE(copies[0], copies[1], loss, seed_tensor);
    return GC_OK;
}

/* In f32 a power-of-two scale is exact, so every way of running a step with scale S must give
 * S times the unscaled gradients, bit for bit, and the same loss: the cached and the plain
 * step, through a backward function (which sees the scale as the loss's seed, once), and
 * through a loss's value_and_grad. Scaling twice would give S^2. */
static void test_scale_applied_once(void) {
    setup s = make_setup(GC_F32);
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 1024;
    int64_t n;
    double loss, scaled_loss;
    gc_cache_config plain = make_config(&s, 5, NULL);
    double *unscaled[2]; /* the cached step's and the full batch's: they sum in other orders */
    for (int cached = 0; cached < 2; cached++) {
        unscaled[cached] = step_grads(&s, &plain, cached, &n, &loss);
        for (int64_t i = 0; i < n; i++) unscaled[cached][i] *= scaler.scale;
    }
    for (int variant = 0; variant < 4; variant++) {
        static const char *const names[4] = {"cached", "full batch", "backward function", "value_and_grad"};
        gc_cache_config config = make_config(&s, 5, &scaler);
        recorder r = {0};
        if (variant == 2) {
            config.backward = recording_backward;
            config.user = &r;
        }
        if (variant == 3) config.loss.value_and_grad = contrastive_value_and_grad;
        double *got = step_grads(&s, &config, variant != 1, &n, &scaled_loss), *want = unscaled[variant != 1];
        CHECK_MSG(memcmp(got, want, (size_t)n * sizeof *got) == 0, "%s: not S x the unscaled gradients (%.3g off)",
                  names[variant], relative_error(got, want, n));
        CHECK_MSG(scaled_loss == loss, "%s: loss %.9g, unscaled %.9g", names[variant], scaled_loss, loss);
        if (variant == 2) /* the loss, then 3 chunks per model (5, 5, 2 rows) */
            CHECK_MSG(r.calls == 1 + 3 + 3 && r.loss_seed == scaler.scale, "backward function: %d calls, loss seed %g",
                      r.calls, r.loss_seed);
        free(got);
    }
    free(unscaled[0]);
    free(unscaled[1]);
    free_setup(&s);
}

/* The functional API carries the scale the caller seeded the loss's backward with. */
static void test_functional_api_scaled(void) {
    setup s = make_setup(GC_F32);
    double *results[2];
    int64_t n;
    for (int scaled = 0; scaled < 2; scaled++) {
        gc_param_list_zero_grad(&s.q.params);
        gc_param_list_zero_grad(&s.p.params);
        gc_manual_seed(7);
        gc_closure *closures[2];
        gc_tensor *leaves[2];
        for (int m = 0; m < 2; m++)
            leaves[m] = gc_cached_forward(m ? (void *)&s.p : (void *)&s.q, encoder_forward, &s.inputs[m], NULL, NULL,
                                          &closures[m]);
        gc_tensor *loss = scaled_contrastive(leaves, 2, &s);
        gc_tensor *seed = gc_full(0, NULL, GC_F32, gc_cpu(), scaled ? 256 : 1);
        REQUIRE(loss && seed && gc_backward(&loss, &seed, 1) == GC_OK);
        for (int m = 0; m < 2; m++) REQUIRE(gc_closure_run(closures[m], leaves[m]) == GC_OK);
        mlp_encoder *encoders[2] = {&s.q, &s.p};
        results[scaled] = collect_grads(encoders, 2, &n);
        for (int m = 0; m < 2; m++) {
            gc_closure_free(closures[m]);
            gc_tensor_release(leaves[m]);
        }
        RELEASE(loss, seed);
    }
    for (int64_t i = 0; i < n; i++) results[0][i] *= 256;
    CHECK(memcmp(results[0], results[1], (size_t)n * sizeof *results[0]) == 0);
    free(results[0]);
    free(results[1]);
    free_setup(&s);
}

/* --- an overflow in one chunk --- */

/* The trainer's step behind a scaler (gradcache/loss_scaler.h); returns whether it skipped. */
static bool scaled_step(setup *s, gc_cache *cache, gc_param_list *params, gc_adamw *adamw, gc_loss_scaler *scaler) {
    double loss;
    REQUIRE(gc_cache_step(cache, s->inputs, &loss, NULL) == GC_OK);
    bool found_inf;
    REQUIRE(gc_loss_scaler_check_grads(params, &found_inf) == GC_OK);
    if (!found_inf) REQUIRE(gc_adamw_step_scaled(adamw, 1 / scaler->scale) == GC_OK);
    gc_loss_scaler_update(scaler, found_inf);
    gc_param_list_zero_grad(params);
    return found_inf;
}

/* Every parameter, master and moment, as bytes. */
static unsigned char *state_bytes(const gc_adamw *adamw, size_t *size) {
    gc_tensor **kinds[4] = {NULL, adamw->master, adamw->exp_avg, adamw->exp_avg_sq};
    size_t total = 0;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < adamw->params.count; i++)
            total += gc_nbytes(k ? kinds[k][i] : adamw->params.items[i].tensor);
    unsigned char *bytes = malloc(total), *at = bytes;
    REQUIRE(bytes);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < adamw->params.count; i++) {
            const gc_tensor *t = k ? kinds[k][i] : adamw->params.items[i].tensor;
            gc_copy_to_host(t, at);
            at += gc_nbytes(t);
        }
    *size = total;
    return bytes;
}

/* The query tower's first input column meets a zero row of w1, so it changes nothing forward;
 * but w1's gradient there is that column times the first layer's gradient. A column of 30000
 * in one chunk's rows overflows that chunk's contribution at scale 2^10 (the other chunks'
 * column is in [-1, 1)): the whole step must be skipped, nothing of the model or of AdamW
 * touched, and the scale halved; the step after it, clean, trains. For the first chunk and
 * for the last (whose graph is kept from the first pass). */
static void zero_first_row(gc_tensor *t) {
    gc_tensor *row = gc_slice0(t, 0, 1), *zeros = gc_zeros(GC_SHAPE(1, HIDDEN), t->dtype, gc_cpu());
    REQUIRE(row && zeros && gc_copy_(row, zeros) == GC_OK);
    RELEASE(row, zeros);
}

static void test_overflow_in_one_chunk(int chunk) {
    setup s = make_setup(GC_F16);
    gc_param_list params = {0};
    for (int e = 0; e < 2; e++) {
        const gc_param_list *own = e ? &s.p.params : &s.q.params;
        for (int i = 0; i < own->count; i++) gc_param_list_add(&params, e ? "p" : "q", own->items[i].name,
                                                               own->items[i].tensor, false);
    }
    gc_adamw adamw;
    gc_adamw_init(&adamw, &params, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 1024;
    gc_cache_config config = make_config(&s, 4, &scaler);
    gc_cache *cache = gc_cache_new(&config);
    CHECK_MSG(!scaled_step(&s, cache, &params, &adamw, &scaler), "the clean batch overflowed at scale 2^10");
    zero_first_row(s.q.w1); /* "q.w1", with its master: the first step moved them */
    zero_first_row(adamw.master[0]);

    gc_tensor *saved_x = gc_clone(s.xq);
    double x[ROWS * IN];
    gc_to_host_f64(s.xq, x);
    for (int row = 4 * chunk; row < 4 * chunk + 4; row++) x[row * IN] = 30000;
    gc_tensor *marked = gc_from_host(x, GC_SHAPE(ROWS, IN), GC_F64, gc_cpu()), *marked_half = gc_cast(marked, GC_F16);
    REQUIRE(saved_x && marked_half && gc_copy_(s.xq, marked_half) == GC_OK);
    RELEASE(marked, marked_half);
    size_t size_before, size_after;
    unsigned char *before = state_bytes(&adamw, &size_before);
    CHECK_MSG(scaled_step(&s, cache, &params, &adamw, &scaler), "chunk %d: the overflow was not found", chunk);
    unsigned char *after = state_bytes(&adamw, &size_after);
    CHECK_MSG(size_before == size_after && memcmp(before, after, size_before) == 0,
              "chunk %d: a skipped step changed the model or AdamW's state", chunk);
    CHECK(adamw.step == 1 && scaler.scale == 512 && scaler.skipped_steps == 1);
    REQUIRE(gc_copy_(s.xq, saved_x) == GC_OK);
    CHECK(!scaled_step(&s, cache, &params, &adamw, &scaler) && adamw.step == 2);
    free(before);
    free(after);
    gc_cache_free(cache);
    gc_adamw_free(&adamw);
    gc_param_list_free(&params);
    gc_tensor_release(saved_x);
    free_setup(&s);
}

/* --- one precision for both passes --- */

/* A model that computes its first pass (no graph) in f32 and its second in f16. */
static gc_tensor *precision_switching_forward(void *state, const gc_batch *chunk) {
    gc_tensor *out = encoder_forward(state, chunk);
    if (gc_grad_enabled()) return out;
    gc_tensor *widened = gc_cast(out, GC_F32);
    gc_tensor_release(out);
    return widened;
}

static void switching_precision(void *unused) {
    (void)unused;
    setup s = make_setup(GC_F16);
    gc_cache_config config = make_config(&s, 4, NULL);
    config.models[0].forward = config.models[1].forward = precision_switching_forward;
    config.keep_last_graph = false;
    gc_cache *cache = gc_cache_new(&config);
    double loss;
    gc_cache_step(cache, s.inputs, &loss, NULL);
}

int main(void) {
    const gc_dtype halves[2] = {GC_F16, GC_BF16};
    for (int d = 0; d < 2; d++) {
        test_half_equals_full_batch(halves[d]);
        test_half_against_f32(halves[d]);
    }
    test_scale_keeps_f16_gradients();
    test_scale_applied_once();
    test_functional_api_scaled();
    test_overflow_in_one_chunk(0);
    test_overflow_in_one_chunk(2);
    gc_test_expect_fatal(switching_precision, NULL,
                         "cache: model 0's second pass gave [4, 8] f16 cpu for chunk 0, its first pass [4, 8] f32 cpu");
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
