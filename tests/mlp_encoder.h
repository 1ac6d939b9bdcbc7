/* The small encoder and loss the GradCache tests share: a two-layer MLP with dropout over
 * plain ops, the InfoNCE loss written out with ops (the reference's targets), and the
 * comparison of two steps' gradients. */
#ifndef GC_TESTS_MLP_ENCODER_H
#define GC_TESTS_MLP_ENCODER_H

#include "check.h"

#define IN 12
#define HIDDEN 24
#define DIM 8

/* A two-layer MLP encoder with dropout: x [B, IN] -> [B, DIM]. */
typedef struct mlp_encoder {
    gc_tensor *w1; /* [IN, HIDDEN] */
    gc_tensor *b1; /* [HIDDEN] */
    gc_tensor *w2; /* [HIDDEN, DIM] */
    double dropout;
    gc_param_list params;
    int calls;     /* forward calls, to count the saved recomputation */
} mlp_encoder;

/* Philox gives the same values on every device, so an encoder is the same wherever it lives. */
static inline mlp_encoder make_encoder_on(gc_device device, gc_dtype dtype, uint64_t seed, double dropout) {
    mlp_encoder e = {.dropout = dropout};
    e.w1 = gc_uniform(GC_SHAPE(IN, HIDDEN), dtype, device, -0.5, 0.5, seed, 0);
    e.b1 = gc_uniform(GC_SHAPE(HIDDEN), dtype, device, -0.1, 0.1, seed + 1, 0);
    e.w2 = gc_uniform(GC_SHAPE(HIDDEN, DIM), dtype, device, -0.5, 0.5, seed + 2, 0);
    REQUIRE(e.w1 && e.b1 && e.w2);
    gc_tensor *all[] = {e.w1, e.b1, e.w2};
    const char *names[] = {"w1", "b1", "w2"};
    for (int i = 0; i < 3; i++) {
        gc_set_requires_grad(all[i], true);
        gc_param_list_add(&e.params, "", names[i], all[i], false);
    }
    return e;
}

static inline mlp_encoder make_encoder(gc_dtype dtype, uint64_t seed, double dropout) {
    return make_encoder_on(gc_cpu(), dtype, seed, dropout);
}

static inline void free_encoder(mlp_encoder *e) {
    gc_tensor_release(e->w1);
    gc_tensor_release(e->b1);
    gc_tensor_release(e->w2);
    gc_param_list_free(&e->params);
}

static inline gc_tensor *encoder_forward(void *state, const gc_batch *chunk) {
    mlp_encoder *e = state;
    e->calls++;
    gc_tensor *h = gc_matmul(chunk->tensors[0], e->w1, false, false);
    gc_tensor *hb = gc_add(h, e->b1);
    gc_tensor *r = gc_tanh(hb);
    gc_tensor *d = gc_nn_dropout(r, e->dropout, true);
    gc_tensor *out = gc_matmul(d, e->w2, false, false);
    gc_tensor *temporaries[] = {h, hb, r, d};
    for (int i = 0; i < 4; i++) gc_tensor_release(temporaries[i]);
    return out;
}

/* InfoNCE with dot products and temperature 0.5: query i's positive is passage i * (Np/Nq). */
static inline gc_tensor *infonce(gc_tensor *const *reps, int count, void *args) {
    (void)args;
    REQUIRE(count == 2);
    const gc_tensor *q = reps[0], *p = reps[1];
    int64_t nq = q->shape[0], np = p->shape[0], group = np / nq;
    gc_tensor *scores = gc_matmul(q, p, false, true);
    gc_tensor *scaled = gc_div_scalar(scores, 0.5);
    gc_tensor *log_probs = gc_log_softmax(scaled);
    double *hot = calloc((size_t)(nq * np), sizeof *hot);
    REQUIRE(hot);
    for (int64_t i = 0; i < nq; i++) hot[i * np + i * group] = 1;
    gc_tensor *one_hot_f64 = gc_from_host(hot, GC_SHAPE(nq, np), GC_F64, q->device);
    gc_tensor *one_hot = gc_cast(one_hot_f64, q->dtype);
    gc_tensor *picked = gc_mul(log_probs, one_hot);
    gc_tensor *total = gc_sum_all(picked);
    gc_tensor *loss = gc_mul_scalar(total, -1.0 / (double)nq);
    gc_tensor *temporaries[] = {scores, scaled, log_probs, one_hot_f64, one_hot, picked, total};
    for (int i = 0; i < 7; i++) gc_tensor_release(temporaries[i]);
    free(hot);
    return loss;
}

/* Gradients of every parameter after a step, as one f64 vector. */
static inline double *collect_grads(mlp_encoder *const *encoders, int n, int64_t *length) {
    int64_t total = 0;
    for (int e = 0; e < n; e++) total += gc_param_list_numel(&encoders[e]->params);
    double *values = calloc((size_t)total, sizeof *values);
    REQUIRE(values);
    int64_t at = 0;
    for (int e = 0; e < n; e++)
        for (int i = 0; i < encoders[e]->params.count; i++) {
            gc_tensor *param = encoders[e]->params.items[i].tensor;
            REQUIRE(gc_grad(param));
            gc_to_host_f64(gc_grad(param), values + at);
            at += gc_numel(param);
        }
    *length = total;
    return values;
}

static inline double relative_error(const double *got, const double *want, int64_t n) {
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        ref += want[i] * want[i];
    }
    return sqrt(diff) / sqrt(ref);
}

#endif
