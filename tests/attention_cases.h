/* What the fused attention's CPU and CUDA tests share: the cases (padding on either side and
 * a fully padded text, causal, sliding windows, grouped-query heads, dropout, T = 1, odd T,
 * T across several tiles), their inputs, and the fused op's forward and gradients as host
 * arrays. */
#ifndef GC_TESTS_ATTENTION_CASES_H
#define GC_TESTS_ATTENTION_CASES_H

#include "check.h"

typedef enum padding_kind { NO_MASK, RIGHT_PADDING, LEFT_PADDING, PADDED_TEXT } padding_kind;

typedef struct attention_case {
    const char *name;
    int64_t batch, heads, kv_heads, length, head_dim;
    padding_kind padding; /* PADDED_TEXT: right padding, and the last text has no token at all */
    bool causal;
    int64_t window;
    double dropout;
} attention_case;

/* The tiles of the CPU kernel are 64 keys and 64 queries: T = 70 and 130 cross them. */
static const attention_case attention_cases[] = {
    {"plain", 2, 2, 2, 7, 5, NO_MASK, false, 0, 0},
    {"right padding, G 2", 3, 4, 2, 9, 6, RIGHT_PADDING, false, 0, 0},
    {"left padding, G 4", 2, 4, 1, 6, 8, LEFT_PADDING, false, 0, 0},
    {"a fully padded text", 3, 2, 2, 5, 4, PADDED_TEXT, false, 0, 0},
    {"causal, padding, G 2, two tiles", 2, 4, 2, 70, 12, RIGHT_PADDING, true, 0, 0},
    {"causal sliding window", 2, 2, 1, 13, 7, NO_MASK, true, 4, 0},
    {"sliding window both ways", 1, 2, 2, 11, 3, LEFT_PADDING, false, 3, 0},
    {"one token", 2, 2, 1, 1, 4, NO_MASK, true, 0, 0},
    {"dropout, causal, padding, G 2", 2, 4, 2, 67, 9, RIGHT_PADDING, true, 0, 0.3},
    {"dropout, three tiles, window", 1, 2, 2, 130, 16, NO_MASK, false, 50, 0.1},
};
#define ATTENTION_CASES ((int)(sizeof attention_cases / sizeof *attention_cases))

#define ATTENTION_SEED 4321u
#define ATTENTION_OFFSET 1000u

static inline gc_attention_fused_options attention_options(const attention_case *c) {
    return (gc_attention_fused_options){.scale = 1 / sqrt((double)c->head_dim), .causal = c->causal,
                                        .window = c->window, .dropout = c->dropout, .seed = ATTENTION_SEED,
                                        .offset = ATTENTION_OFFSET};
}

/* Text b's real tokens: all but b of them (at least one), none for PADDED_TEXT's last text. */
static inline bool attention_token_real(const attention_case *c, int64_t b, int64_t t) {
    int64_t real = c->length - b > 0 ? c->length - b : 1;
    switch (c->padding) {
    case NO_MASK: return true;
    case RIGHT_PADDING: return t < real;
    case LEFT_PADDING: return t >= c->length - real;
    case PADDED_TEXT: return b < c->batch - 1 && t < real;
    }
    return true;
}

/* The f32 tolerance relative to a result's largest element: the two computations sum the
 * same terms of order 1 in other orders (dot products of Dh terms, rows of T keys, gradients
 * of G T rows) with other exps, each result within some (Dh + G T) 2^-24 of the largest:
 * 2e-5 holds the longest case (G T = 134) and fails any wrong term, off by O(1). A text with
 * no token at all has every logit near -10000, where an f32 is rounded to 2^-10 (its ulp
 * is 2^-10 there): the dot products' last bits move such a logit by a rounding step, so that
 * text's probabilities agree to some 2^-10 only. */
static inline double attention_f32_rtol(const attention_case *c) { return c->padding == PADDED_TEXT ? 0x1p-9 : 2e-5; }

/* The inputs of a case: q [B, H, T, Dh], k, v [B, KVH, T, Dh], normal (each its own stream);
 * g [B, H, T, Dh] the output's gradient; bias [B, 1, 1, T] -10000 on padding (NULL: no
 * mask), as attention_inputs.c makes it. All f64 on the CPU. */
typedef struct attention_inputs {
    gc_tensor *q, *k, *v, *g, *bias;
} attention_inputs;

static inline attention_inputs attention_make_inputs(const attention_case *c) {
    attention_inputs in;
    const gc_device cpu = gc_cpu();
    in.q = gc_normal(GC_SHAPE(c->batch, c->heads, c->length, c->head_dim), GC_F64, cpu, 0, 1, 11, 0);
    in.k = gc_normal(GC_SHAPE(c->batch, c->kv_heads, c->length, c->head_dim), GC_F64, cpu, 0, 1, 12, 0);
    in.v = gc_normal(GC_SHAPE(c->batch, c->kv_heads, c->length, c->head_dim), GC_F64, cpu, 0, 1, 13, 0);
    in.g = gc_normal(GC_SHAPE(c->batch, c->heads, c->length, c->head_dim), GC_F64, cpu, 0, 1, 14, 0);
    REQUIRE(in.q && in.k && in.v && in.g);
    in.bias = NULL;
    if (c->padding != NO_MASK) {
        double *host = malloc(sizeof(double) * (size_t)(c->batch * c->length));
        REQUIRE(host);
        for (int64_t b = 0; b < c->batch; b++)
            for (int64_t t = 0; t < c->length; t++) host[b * c->length + t] = attention_token_real(c, b, t) ? 0 : -10000;
        in.bias = gc_from_host(host, GC_SHAPE(c->batch, 1, 1, c->length), GC_F64, cpu);
        free(host);
        REQUIRE(in.bias);
    }
    return in;
}

static inline void attention_free_inputs(attention_inputs *in) { RELEASE(in->q, in->k, in->v, in->g, in->bias); }

/* t cast to dtype and moved to device (a new reference; NULL stays NULL). */
static inline gc_tensor *attention_on(const gc_tensor *t, gc_dtype dtype, gc_device device) {
    if (!t) return NULL;
    gc_tensor *cast = gc_cast(t, dtype), *moved = gc_to_device(cast, device);
    gc_tensor_release(cast);
    REQUIRE(moved);
    return moved;
}

/* The fused op's output and gradients (of q, k, v through gc_backward, seeded with g) for a
 * case's inputs in dtype on device, as f64 host arrays (out, dq: numel(q); dk, dv: numel(k)). */
typedef struct attention_results {
    double *out, *dq, *dk, *dv;
} attention_results;

static inline double *attention_host(const gc_tensor *t) {
    REQUIRE(t);
    double *host = malloc(sizeof(double) * (size_t)gc_numel(t));
    REQUIRE(host);
    gc_to_host_f64(t, host);
    return host;
}

static inline attention_results attention_fused_run(const attention_case *c, const attention_inputs *in,
                                                    gc_dtype dtype, gc_device device) {
    gc_tensor *q = attention_on(in->q, dtype, device), *k = attention_on(in->k, dtype, device);
    gc_tensor *v = attention_on(in->v, dtype, device), *g = attention_on(in->g, dtype, device);
    gc_tensor *bias = attention_on(in->bias, dtype, device);
    gc_set_requires_grad(q, true);
    gc_set_requires_grad(k, true);
    gc_set_requires_grad(v, true);
    gc_attention_fused_options o = attention_options(c);
    gc_tensor *out = gc_attention_fused(q, k, v, bias, &o);
    REQUIRE(out && gc_backward(&out, &g, 1) == GC_OK);
    attention_results r = {attention_host(out), attention_host(gc_grad(q)), attention_host(gc_grad(k)),
                           attention_host(gc_grad(v))};
    RELEASE(q, k, v, g, bias, out);
    return r;
}

static inline void attention_free_results(attention_results *r) {
    free(r->out);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

/* The largest |want| of n, at least 1e-30 (a tolerance relative to it is never 0). */
static inline double attention_largest(const double *want, int64_t n) {
    double largest = 1e-30;
    for (int64_t i = 0; i < n; i++) largest = fmax(largest, fabs(want[i]));
    return largest;
}

/* Every element of got within rtol times the largest |want| (one check, naming the worst). */
static inline void attention_expect_close(const char *what, const char *name, const double *got, const double *want,
                                          int64_t n, double rtol) {
    double tolerance = rtol * attention_largest(want, n), worst = 0;
    int64_t worst_index = 0;
    for (int64_t i = 0; i < n; i++) {
        double error = isnan(got[i]) ? INFINITY : fabs(got[i] - want[i]);
        if (error > worst) worst = error, worst_index = i;
    }
    CHECK_MSG(worst <= tolerance, "%s, %s: element %lld is %.12g, want %.12g (tolerance %.3g)", name, what,
              (long long)worst_index, got[worst_index], want[worst_index], tolerance);
}

/* All four results of `got` against `want` within rtol of each one's largest element. */
static inline void attention_expect_results(const char *name, const attention_case *c, const attention_results *got,
                                            const attention_results *want, double rtol) {
    int64_t nq = c->batch * c->heads * c->length * c->head_dim, nk = c->batch * c->kv_heads * c->length * c->head_dim;
    attention_expect_close("output", name, got->out, want->out, nq, rtol);
    attention_expect_close("dq", name, got->dq, want->dq, nq, rtol);
    attention_expect_close("dk", name, got->dk, want->dk, nk, rtol);
    attention_expect_close("dv", name, got->dv, want->dv, nk, rtol);
}

#endif
