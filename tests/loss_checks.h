/* What the tests of the contrastive losses beyond one positive share (test_loss_multi.c,
 * test_matryoshka.c): a loss against a PyTorch fixture case (tests/make_loss_fixture.py), and
 * a GradCache step with a loss against the plain full-batch step. */
#ifndef GC_TESTS_LOSS_CHECKS_H
#define GC_TESTS_LOSS_CHECKS_H

#include "fixture.h"
#include "mlp_encoder.h"

#define LOSS_FIXTURE GC_TEST_FIXTURES "/losses_v1.bin"

/* f64 throughout, the same formula with a few dozen ops each way: the fixture and the library
 * agree to a few f64 roundings (1e-16 each); 1e-12 leaves room and still fails any mistake in
 * a term. */
#define LOSS_FIXTURE_TOLERANCE 1e-12

static inline gc_tensor *fixture_entry(const gc_param_list *fixture, const char *name, const char *field) {
    char key[GC_PARAM_NAME_MAX];
    snprintf(key, sizeof key, "%s.%s", name, field);
    return gc_fixture_get(fixture, key);
}

/* loss(q, p) and its gradients through `loss` against fixture case `name`: the forward with
 * autograd's gradients, and value_and_grad when the loss has one. */
static inline void check_against_fixture(const gc_param_list *fixture, const char *name, gc_loss_fn loss,
                                         const char *how) {
    gc_tensor *q = gc_detach(fixture_entry(fixture, name, "q")), *p = gc_detach(fixture_entry(fixture, name, "p"));
    gc_set_requires_grad(q, true);
    gc_set_requires_grad(p, true);
    gc_tensor *want_loss = fixture_entry(fixture, name, "loss");
    gc_tensor *want[2] = {fixture_entry(fixture, name, "grad_q"), fixture_entry(fixture, name, "grad_p")};
    char what[160];
    gc_tensor *reps[2] = {q, p};
    gc_tensor *value = loss.forward(reps, 2, loss.args);
    REQUIRE(value && gc_backward(&value, NULL, 1) == GC_OK);
    gc_tensor *flat = gc_reshape(value, GC_SHAPE(1));
    snprintf(what, sizeof what, "%s, %s: forward", name, how);
    gc_test_expect_close(want_loss, flat, 0, LOSS_FIXTURE_TOLERANCE, what);
    for (int s = 0; s < 2; s++) {
        snprintf(what, sizeof what, "%s, %s: autograd's gradient %d", name, how, s);
        gc_test_expect_close(want[s], gc_grad(reps[s]), LOSS_FIXTURE_TOLERANCE, LOSS_FIXTURE_TOLERANCE, what);
    }
    if (loss.value_and_grad) {
        double got = 0;
        gc_tensor *grads[2] = {NULL, NULL};
        REQUIRE(loss.value_and_grad(reps, 2, loss.args, 1, &got, grads) == GC_OK);
        double expected = gc_item(want_loss);
        CHECK_MSG(fabs(got - expected) <= LOSS_FIXTURE_TOLERANCE * fabs(expected), "%s, %s: value_and_grad %.17g, "
                  "PyTorch %.17g", name, how, got, expected);
        for (int s = 0; s < 2; s++) {
            snprintf(what, sizeof what, "%s, %s: value_and_grad's gradient %d", name, how, s);
            gc_test_expect_close(want[s], grads[s], LOSS_FIXTURE_TOLERANCE, LOSS_FIXTURE_TOLERANCE, what);
        }
        RELEASE(grads[0], grads[1]);
    }
    RELEASE(q, p, value, flat);
}

/* One GradCache step with `loss` (f64, dropout on, chunks of 2 and 3 rows: never the whole
 * batch) against the plain full-batch step from the same RNG state, which differentiates the
 * loss's forward by autograd (so value_and_grad is checked too): every parameter's gradient to
 * a norm-relative 1e-10 (f64: the steps add the same terms in other orders, ~1e-16 each), the
 * loss too. */
static inline void check_cache_matches_full(gc_loss_fn loss, int64_t queries, int64_t passages, const char *what) {
    mlp_encoder q = make_encoder(GC_F64, 10, 0.1), p = make_encoder(GC_F64, 20, 0.1);
    gc_tensor *xq = gc_uniform(GC_SHAPE(queries, IN), GC_F64, gc_cpu(), -1, 1, 30, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(passages, IN), GC_F64, gc_cpu(), -1, 1, 31, 0);
    REQUIRE(xq && xp);
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_cache_config config = {.n_models = 2,
                              .models = {{&q, encoder_forward, 2, &q.params}, {&p, encoder_forward, 3, &p.params}},
                              .loss = loss};
    gc_cache *cache = gc_cache_new(&config);
    mlp_encoder *encoders[2] = {&q, &p};
    double cached_loss = 0, full_loss = 0;
    int64_t n;
    gc_manual_seed(7);
    REQUIRE(gc_cache_step(cache, inputs, &cached_loss, NULL) == GC_OK);
    double *cached = collect_grads(encoders, 2, &n);
    gc_param_list_zero_grad(&q.params);
    gc_param_list_zero_grad(&p.params);
    config.loss.value_and_grad = NULL;
    gc_cache *by_autograd = gc_cache_new(&config);
    gc_manual_seed(7);
    REQUIRE(gc_cache_full_batch_step(by_autograd, inputs, &full_loss) == GC_OK);
    gc_cache_free(by_autograd);
    double *full = collect_grads(encoders, 2, &n);
    double error = relative_error(cached, full, n);
    CHECK_MSG(error <= 1e-10, "%s: GradCache's gradient, relative error %.3g to the full batch's", what, error);
    CHECK_MSG(fabs(cached_loss - full_loss) <= 1e-10 * fabs(full_loss), "%s: loss %.17g, full batch %.17g", what,
              cached_loss, full_loss);
    free(cached);
    free(full);
    gc_cache_free(cache);
    RELEASE(xq, xp);
    free_encoder(&q);
    free_encoder(&p);
}

#endif
