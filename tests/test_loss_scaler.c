/* Mixed-precision training pieces on the CPU: the dynamic loss scaler (PyTorch GradScaler's
 * schedule), a step skipped on an inf or nan gradient with parameters, masters and moments
 * left bit for bit, unscaling and clipping folded into the optimizer's f32 update, and why
 * master weights matter (pure f16 SGD stalls where master-weight SGD does not). */
#include <float.h>

#include "check.h"
#include "values.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

/* --- the schedule --- */

static void test_defaults(void) {
    gc_loss_scaler s;
    gc_loss_scaler_init(&s);
    CHECK(s.scale == 65536 && s.growth_factor == 2 && s.backoff_factor == 0.5 && s.growth_interval == 2000);
    CHECK(s.growth_tracker == 0 && s.skipped_steps == 0);
}

/* 2000 clean steps double the scale, at the 2000th and not before; an overflow halves it and
 * starts the count again. */
static void test_default_interval(void) {
    gc_loss_scaler s;
    gc_loss_scaler_init(&s);
    for (int i = 0; i < 1999; i++) gc_loss_scaler_update(&s, false);
    CHECK(s.scale == 65536 && s.growth_tracker == 1999);
    gc_loss_scaler_update(&s, false);
    CHECK(s.scale == 131072 && s.growth_tracker == 0);
    for (int i = 0; i < 1500; i++) gc_loss_scaler_update(&s, false);
    gc_loss_scaler_update(&s, true);
    CHECK(s.scale == 65536 && s.growth_tracker == 0 && s.skipped_steps == 1);
    for (int i = 0; i < 1999; i++) gc_loss_scaler_update(&s, false);
    CHECK(s.scale == 65536); /* the 1500 steps before the overflow do not count */
    gc_loss_scaler_update(&s, false);
    CHECK(s.scale == 131072);
}

/* A shortened interval, other factors, and the ceiling: a scale that would pass f32's largest
 * value (where PyTorch keeps it, as an f32 tensor) stays where it is. */
static void test_short_interval(void) {
    gc_loss_scaler s;
    gc_loss_scaler_init(&s);
    s.growth_interval = 3;
    s.growth_factor = 4;
    s.backoff_factor = 0.25;
    const bool overflows[] = {false, false, false, false, true, true, false, false, false};
    const double scales[] = {65536, 65536, 262144, 262144, 65536, 16384, 16384, 16384, 65536};
    for (int i = 0; i < 9; i++) {
        gc_loss_scaler_update(&s, overflows[i]);
        CHECK_MSG(s.scale == scales[i], "after update %d: scale %g, want %g", i, s.scale, scales[i]);
    }
    CHECK(s.skipped_steps == 2);
    s.scale = 0x1p126;
    s.growth_interval = 1;
    s.growth_factor = 2;
    gc_loss_scaler_update(&s, false);
    CHECK(s.scale == 0x1p127);
    gc_loss_scaler_update(&s, false); /* 2^128 is inf in f32 */
    CHECK(s.scale == 0x1p127 && s.growth_tracker == 0);
}

/* --- a model of one f16 weight vector and one bf16 bias, trained by AdamW --- */

typedef struct model {
    gc_tensor *w, *b; /* [5] f16, [3] bf16 */
    gc_param_list params;
    gc_adamw adamw;
} model;

static model make_model(void) {
    model m = {0};
    m.w = gc_test_tensor(GC_F16, GC_SHAPE(5), (const double[]){0.5, -1, 0.25, 2, -0.75});
    m.b = gc_test_tensor(GC_BF16, GC_SHAPE(3), (const double[]){1, 0, -0.5});
    gc_set_requires_grad(m.w, true);
    gc_set_requires_grad(m.b, true);
    gc_param_list_add(&m.params, "", "w", m.w, false);
    gc_param_list_add(&m.params, "", "b", m.b, true);
    gc_adamw_init(&m.adamw, &m.params, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    return m;
}

static void free_model(model *m) {
    gc_adamw_free(&m->adamw);
    gc_param_list_free(&m->params);
    RELEASE(m->w, m->b);
}

/* Makes `values` (scaled by `scale`, rounded into p's dtype) the gradient of p. */
static void set_grad(gc_tensor *p, const double *values, double scale) {
    gc_zero_grad(p);
    int64_t n = gc_numel(p);
    double scaled[8];
    for (int64_t i = 0; i < n; i++) scaled[i] = values[i] * scale;
    gc_tensor *factor = gc_test_tensor(p->dtype, p->ndim, p->shape, scaled);
    gc_tensor *product = gc_mul(p, factor);
    gc_tensor *seed = gc_ones(p->ndim, p->shape, p->dtype, p->device);
    REQUIRE(product && seed && gc_backward(&product, &seed, 1) == GC_OK);
    RELEASE(factor, product, seed);
}

static const double w_grad[5] = {0.25, -0.5, 1, 0.125, -2}, b_grad[3] = {0.5, -0.25, 1};

/* The step of the recipe in gradcache/loss_scaler.h; returns whether it was skipped. */
static bool scaled_step(model *m, gc_loss_scaler *scaler, double max_norm) {
    bool found_inf;
    REQUIRE(gc_loss_scaler_check_grads(&m->params, &found_inf) == GC_OK);
    if (!found_inf) {
        double grad_scale = 1 / scaler->scale;
        gc_clip_grad_scale(&m->params, max_norm, &grad_scale);
        REQUIRE(gc_adamw_step_scaled(&m->adamw, grad_scale) == GC_OK);
    }
    gc_loss_scaler_update(scaler, found_inf);
    gc_param_list_zero_grad(&m->params);
    return found_inf;
}

/* The bytes of every parameter, master and moment. */
typedef struct snapshot {
    unsigned char bytes[8][64];
    int count;
} snapshot;

static void take(snapshot *s, const model *m) {
    gc_tensor *all[8] = {m->w, m->b, m->adamw.master[0], m->adamw.master[1], m->adamw.exp_avg[0],
                         m->adamw.exp_avg[1], m->adamw.exp_avg_sq[0], m->adamw.exp_avg_sq[1]};
    s->count = 8;
    for (int i = 0; i < 8; i++) {
        REQUIRE(all[i] && gc_nbytes(all[i]) <= sizeof s->bytes[i]);
        memset(s->bytes[i], 0, sizeof s->bytes[i]);
        gc_copy_to_host(all[i], s->bytes[i]);
    }
}

/* An overflowing step (an inf, a -inf, a nan, or a value past f16's range that the scale
 * pushed there) is skipped: parameters, masters and moments bit for bit as before, the AdamW
 * step count too; the scale is halved. A clean step afterwards trains. */
static void test_overflow_skips_the_step(void) {
    model m = make_model();
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 4096; /* 2 * 2^16 would overflow f16 already: see the 1e6 case below */
    set_grad(m.w, w_grad, scaler.scale);
    set_grad(m.b, b_grad, scaler.scale);
    CHECK(!scaled_step(&m, &scaler, 1e9));
    CHECK(m.adamw.step == 1 && m.adamw.master[0] && m.adamw.master[1]);
    const double bad[4] = {INFINITY, -INFINITY, NAN, 1e6}; /* 1e6 is past f16's 65504: inf */
    for (int k = 0; k < 4; k++) {
        snapshot before, after;
        take(&before, &m);
        double grads[5] = {0.25, -0.5, 1, 0.125, -2};
        grads[k] = bad[k];
        set_grad(m.w, grads, 1);
        set_grad(m.b, b_grad, scaler.scale);
        double scale = scaler.scale;
        CHECK_MSG(scaled_step(&m, &scaler, 1e9), "gradient %g not found", bad[k]);
        take(&after, &m);
        for (int i = 0; i < before.count; i++)
            CHECK_MSG(memcmp(before.bytes[i], after.bytes[i], sizeof before.bytes[i]) == 0,
                      "gradient %g: tensor %d changed by a skipped step", bad[k], i);
        CHECK(m.adamw.step == 1 && scaler.scale == scale / 2 && scaler.skipped_steps == k + 1);
    }
    /* a bf16 nan alone (the other gradient clean) is found too */
    set_grad(m.w, w_grad, scaler.scale);
    set_grad(m.b, (const double[]){0, NAN, 0}, 1);
    CHECK(scaled_step(&m, &scaler, 1e9));
    set_grad(m.w, w_grad, scaler.scale);
    set_grad(m.b, b_grad, scaler.scale);
    snapshot before, after;
    take(&before, &m);
    CHECK(!scaled_step(&m, &scaler, 1e9) && m.adamw.step == 2);
    take(&after, &m);
    CHECK(memcmp(before.bytes[2], after.bytes[2], sizeof before.bytes[2]) != 0); /* w's master moved */
    free_model(&m);
}

/* Unscaling and clipping inside the update: gradients scaled by S and stepped with
 * grad_scale c / S give bit for bit the step of the unscaled gradients with grad_scale c
 * (S a power of two: scaling by it is exact in f32), and the norm gc_clip_grad_scale reports
 * is the unscaled one, before clipping. */
static void test_unscale_then_clip(void) {
    model scaled = make_model(), plain = make_model();
    const double S = 1024;
    set_grad(scaled.w, w_grad, S);
    set_grad(scaled.b, b_grad, S);
    set_grad(plain.w, w_grad, 1);
    set_grad(plain.b, b_grad, 1);
    double norm = 0;
    for (int i = 0; i < 5; i++) norm += w_grad[i] * w_grad[i];
    for (int i = 0; i < 3; i++) norm += b_grad[i] * b_grad[i];
    norm = sqrt(norm);
    double scaled_factor = 1 / S, plain_factor = 1;
    CHECK_NEAR(gc_clip_grad_scale(&scaled.params, 1, &scaled_factor), norm, 0, 1e-6);
    CHECK_NEAR(gc_clip_grad_scale(&plain.params, 1, &plain_factor), norm, 0, 1e-6);
    CHECK_NEAR(plain_factor, 1 / (norm + 1e-6), 0, 1e-6); /* clipped to norm 1 */
    CHECK(scaled_factor == plain_factor / S);
    /* a norm below max_norm leaves the factor alone */
    double untouched = 1 / S;
    gc_clip_grad_scale(&scaled.params, 100, &untouched);
    CHECK(untouched == 1 / S);
    REQUIRE(gc_adamw_step_scaled(&scaled.adamw, scaled_factor) == GC_OK);
    REQUIRE(gc_adamw_step_scaled(&plain.adamw, plain_factor) == GC_OK);
    gc_test_expect_close(plain.w, scaled.w, 0, 0, "w: scaled step against the unscaled one");
    gc_test_expect_close(plain.adamw.master[0], scaled.adamw.master[0], 0, 0, "w's master");
    gc_test_expect_close(plain.adamw.exp_avg_sq[1], scaled.adamw.exp_avg_sq[1], 0, 0, "b's second moment");
    free_model(&scaled);
    free_model(&plain);
}

/* Why the unscaling is inside the f32 update: gradients of 2^-26 are below f16's smallest
 * subnormal (2^-24) and flush to zero; scaled by 2^16 they are 2^-10, exact in f16, and SGD
 * with grad_scale 2^-16 moves the master by lr 2^-26 exactly. Unscaling them in place in
 * f16 would have flushed them again. */
static void test_scaling_keeps_small_gradients(void) {
    const double tiny = ldexp(1, -26);
    gc_tensor *p = gc_test_tensor(GC_F16, GC_SHAPE(1), (const double[]){1});
    gc_set_requires_grad(p, true);
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "p", p, false);
    gc_sgd sgd;
    gc_sgd_init(&sgd, &list, 1, 0, 0);
    set_grad(p, (const double[]){tiny}, 1);
    CHECK(gc_item(gc_grad(p)) == 0); /* flushed */
    set_grad(p, (const double[]){tiny}, 65536);
    CHECK(gc_item(gc_grad(p)) == ldexp(1, -10));
    bool found_inf;
    REQUIRE(gc_loss_scaler_check_grads(&list, &found_inf) == GC_OK && !found_inf);
    REQUIRE(gc_sgd_step_scaled(&sgd, 1.0 / 65536) == GC_OK);
    CHECK(gc_item(sgd.master[0]) == (double)(float)(1 - tiny));
    gc_tensor *unscaled = gc_clone(gc_grad(p));
    gc_scale_inplace(unscaled, 1.0 / 65536);
    CHECK(gc_item(unscaled) == 0); /* what an in-place f16 unscale would have left */
    gc_sgd_free(&sgd);
    gc_param_list_free(&list);
    RELEASE(p, unscaled);
}

/* --- master weights --- */

/* f16 has 11 significant bits: between 1 and 2 its values are 2^-10 apart, so an update of
 * lr g = 10^-4 (below half that, 2^-11 = 4.9e-4) rounds back to 1 at every step: pure f16 SGD
 * stalls. With an f32 master the 100 updates add up to 0.01 and the weight reaches
 * round_f16(0.99); bf16 (8 bits) stalls the same way and moves with a master. */
static void test_master_weights_matter(gc_dtype dtype) {
    double g = 1e-4;
    for (int masters = 0; masters < 2; masters++) {
        gc_tensor *p = gc_test_tensor(dtype, GC_SHAPE(1), (const double[]){1});
        gc_set_requires_grad(p, true);
        gc_param_list list = {0};
        gc_param_list_add(&list, "", "p", p, false);
        gc_sgd sgd;
        gc_sgd_init(&sgd, &list, 1, 0, 0);
        sgd.master_weights = masters;
        float master = 1; /* what the f32 master must hold: the f32 SGD trajectory */
        for (int step = 0; step < 100; step++) {
            set_grad(p, (const double[]){g}, 1);
            REQUIRE(gc_sgd_step(&sgd) == GC_OK);
            master = fmaf(-1.0f, (float)gc_item(gc_grad(p)), master);
        }
        double got = gc_item(p);
        if (!masters) {
            CHECK_MSG(got == 1, "%s: pure 16-bit SGD moved to %.9g", gc_dtype_name(dtype), got);
            CHECK(sgd.master[0] == NULL);
        } else {
            CHECK_MSG(sgd.master[0] && gc_item(sgd.master[0]) == master, "%s: master %.9g, want %.9g",
                      gc_dtype_name(dtype), sgd.master[0] ? gc_item(sgd.master[0]) : NAN, master);
            gc_tensor *want = gc_test_tensor(dtype, GC_SHAPE(1), (const double[]){master}); /* rounded to dtype */
            CHECK_MSG(got == gc_item(want) && got < 0.995, "%s: master-weight SGD reached %.9g", gc_dtype_name(dtype),
                      got);
            gc_tensor_release(want);
        }
        gc_sgd_free(&sgd);
        gc_param_list_free(&list);
        gc_tensor_release(p);
    }
}

/* The master follows the f32 trajectory exactly: AdamW on an f16 parameter with masters and
 * AdamW on an f32 copy of it, given the same (f16-exact) gradients, hold bitwise the same f32
 * values after every step, and the f16 parameter is always that value rounded. */
static void test_master_is_the_f32_trajectory(void) {
    gc_tensor *half = gc_test_tensor(GC_F16, GC_SHAPE(5), (const double[]){0.5, -1, 0.25, 2, -0.75});
    gc_tensor *full = gc_cast(half, GC_F32);
    gc_set_requires_grad(half, true);
    gc_set_requires_grad(full, true);
    gc_param_list lists[2] = {{0}, {0}};
    gc_param_list_add(&lists[0], "", "p", half, false);
    gc_param_list_add(&lists[1], "", "p", full, false);
    gc_adamw opts[2];
    for (int k = 0; k < 2; k++) gc_adamw_init(&opts[k], &lists[k], 3e-3, 0.9, 0.999, 1e-8, 0.1);
    for (int step = 0; step < 20; step++) {
        double grads[5];
        for (int i = 0; i < 5; i++) grads[i] = ((i * 3 + step * 5) % 7 - 3) * 0.125;
        set_grad(half, grads, 1);
        set_grad(full, grads, 1);
        REQUIRE(gc_adamw_step(&opts[0]) == GC_OK && gc_adamw_step(&opts[1]) == GC_OK);
        gc_test_expect_close(full, opts[0].master[0], 0, 0, "master against the f32 parameter");
        gc_tensor *rounded = gc_cast(full, GC_F16);
        gc_test_expect_close(rounded, half, 0, 0, "f16 parameter against its rounded master");
        gc_tensor_release(rounded);
    }
    for (int k = 0; k < 2; k++) {
        gc_adamw_free(&opts[k]);
        gc_param_list_free(&lists[k]);
    }
    RELEASE(half, full);
}

/* Masters in the checkpoint state: saved, loaded (a copy), and a state without them, or with
 * one for an f32 parameter, refused naming the entry. */
static void test_master_state(void) {
    model m = make_model();
    set_grad(m.w, w_grad, 1);
    set_grad(m.b, b_grad, 1);
    REQUIRE(gc_adamw_step(&m.adamw) == GC_OK);
    gc_param_list state = {0};
    gc_adamw_state(&m.adamw, "o", &state);
    CHECK(state.count == 6 && gc_param_list_find(&state, "o.master.w") == m.adamw.master[0] &&
          gc_param_list_find(&state, "o.master.b") == m.adamw.master[1]);
    model other = make_model();
    CHECK(gc_adamw_load_state(&other.adamw, "o", &state, 1) == GC_OK);
    CHECK(other.adamw.master[0] != m.adamw.master[0]);
    gc_test_expect_close(m.adamw.master[0], other.adamw.master[0], 0, 0, "loaded master");

    gc_param_list no_master = {0};
    for (int i = 0; i < state.count; i++)
        if (!strstr(state.items[i].name, "master.w"))
            gc_param_list_add(&no_master, "", state.items[i].name, state.items[i].tensor, false);
    CHECK(gc_adamw_load_state(&other.adamw, "o", &no_master, 1) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "'o.master.w' is missing: the state was saved without master weights") != NULL,
              "%s", gc_last_error());
    other.adamw.master_weights = false; /* a run without masters takes such a state */
    CHECK(gc_adamw_load_state(&other.adamw, "o", &no_master, 1) == GC_OK && other.adamw.master[0] == NULL);

    gc_tensor *f32 = gc_zeros(GC_SHAPE(2), GC_F32, cpu);
    gc_set_requires_grad(f32, true);
    gc_param_list f32_params = {0}, f32_state = {0};
    gc_param_list_add(&f32_params, "", "v", f32, false);
    gc_adamw f32_opt;
    gc_adamw_init(&f32_opt, &f32_params, 1e-3, 0.9, 0.999, 1e-8, 0);
    gc_tensor *zeros = gc_zeros(GC_SHAPE(2), GC_F32, cpu);
    gc_param_list_add(&f32_state, "", "exp_avg.v", zeros, false);
    gc_param_list_add(&f32_state, "", "exp_avg_sq.v", zeros, false);
    gc_param_list_add(&f32_state, "", "master.v", zeros, false);
    CHECK(gc_adamw_load_state(&f32_opt, "", &f32_state, 1) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "'master.v' is a master copy, which only f16 and bf16 parameters have") != NULL,
              "%s", gc_last_error());
    gc_clear_error();
    gc_adamw_free(&f32_opt);
    gc_param_list_free(&f32_params);
    gc_param_list_free(&f32_state);
    gc_param_list_free(&state);
    gc_param_list_free(&no_master);
    RELEASE(f32, zeros);
    free_model(&m);
    free_model(&other);
}

/* check_grads: no gradients is clean; an allocation failure is returned with found_inf set
 * (a step that could not be checked is not taken). */
static void test_check_grads_edges(void) {
    model m = make_model();
    bool found_inf = true;
    CHECK(gc_loss_scaler_check_grads(&m.params, &found_inf) == GC_OK && !found_inf);
    set_grad(m.w, w_grad, 1);
    gc_memory_set_limit(cpu, gc_memory_get_stats(cpu).live_bytes + 1);
    CHECK(gc_loss_scaler_check_grads(&m.params, &found_inf) == GC_ERR_MEM_LIMIT && found_inf);
    gc_memory_set_limit(cpu, 0);
    gc_clear_error();
    free_model(&m);
}

static void bad_backoff(void *unused) {
    (void)unused;
    gc_loss_scaler s;
    gc_loss_scaler_init(&s);
    s.backoff_factor = 1;
    gc_loss_scaler_update(&s, true);
}

static void nan_grad_scale(void *unused) {
    (void)unused;
    model m = make_model();
    gc_adamw_step_scaled(&m.adamw, NAN);
}

int main(void) {
    test_defaults();
    test_default_interval();
    test_short_interval();
    test_overflow_skips_the_step();
    test_unscale_then_clip();
    test_scaling_keeps_small_gradients();
    test_master_weights_matter(GC_F16);
    test_master_weights_matter(GC_BF16);
    test_master_is_the_f32_trajectory();
    test_master_state();
    test_check_grads_edges();
    gc_test_expect_fatal(bad_backoff, NULL, "loss_scaler_update: loss scaler with scale 65536");
    gc_test_expect_fatal(nan_grad_scale, NULL, "adamw_step: grad_scale nan is not finite and >= 0");
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
