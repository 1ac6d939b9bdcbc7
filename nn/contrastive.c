/* The in-batch contrastive (InfoNCE) loss and its gc_loss_fn, built from recorded ops so
 * that autograd differentiates them.
 *
 * f16 and bf16 inputs are cast to f32 first, as autocast does for losses: in 16 bits a
 * sum of squares overflows (f16 tops out at 65504) or keeps 3 digits (bf16), and f16
 * flushes eps^2 = 1e-24 to 0. */
#include <math.h>

#include "gradcache/loss.h"
#include "gradcache/ops.h"
#include "tensor/op_util.h"

/* Cosine normalises a row as x / sqrt(||x||^2 + eps^2). That is F.normalize's
 * x / max(||x||, eps) to a relative eps^2 / (2 ||x||^2), below an f64 rounding for
 * ||x|| > 1e-4, and like it maps a zero row to 0 with the gradient g / eps there; it needs
 * no max op. */
#define COSINE_EPS 1e-12

static void check_arguments(const gc_tensor *queries, const gc_tensor *passages,
                            const gc_contrastive_options *options) {
    char tq[128], tp[128], tt[128];
    if (!options) gc_fatal("contrastive_loss: options is NULL");
    gc_tensor_str(queries, tq, sizeof tq);
    gc_tensor_str(passages, tp, sizeof tp);
    if (queries->ndim != 2 || passages->ndim != 2 || queries->shape[1] != passages->shape[1])
        gc_fatal("contrastive_loss: needs queries [Nq, D] and passages [Np, D], got %s and %s", tq, tp);
    gc_check_float("contrastive_loss", queries);
    gc_check_same_dtype("contrastive_loss", queries, passages);
    gc_check_same_device("contrastive_loss", queries, passages);
    if (options->similarity != GC_SIMILARITY_DOT && options->similarity != GC_SIMILARITY_COSINE)
        gc_fatal("contrastive_loss: unknown similarity %d", (int)options->similarity);
    if (!(options->temperature > 0) || isinf(options->temperature))
        gc_fatal("contrastive_loss: temperature %g is not positive and finite", options->temperature);
    int64_t n_queries = queries->shape[0], n_passages = passages->shape[0];
    const gc_tensor *targets = options->targets;
    if (targets) {
        gc_tensor_str(targets, tt, sizeof tt);
        if (targets->dtype != GC_I32 || targets->ndim != 1 || targets->shape[0] != n_queries)
            gc_fatal("contrastive_loss: needs i32 targets [%lld] for queries %s, got %s", (long long)n_queries, tq,
                     tt);
        gc_check_same_device("contrastive_loss", queries, targets);
    } else if (n_queries > 0 && n_passages % n_queries != 0) {
        gc_fatal("contrastive_loss: %lld passages %s are not a multiple of %lld queries %s (give targets)",
                 (long long)n_passages, tp, (long long)n_queries, tq);
    }
}

/* x [N, D] -> x / sqrt(||x||^2 + eps^2) per row */
static gc_tensor *normalize_rows(const gc_tensor *x) {
    gc_tensor *squares = gc_mul(x, x);
    gc_tensor *norms_sq = gc_sum_last(squares, true); /* [N, 1] */
    gc_tensor *padded = gc_add_scalar(norms_sq, COSINE_EPS * COSINE_EPS);
    gc_tensor *inverse_norms = gc_rsqrt(padded);
    gc_tensor *unit = gc_mul(x, inverse_norms);
    gc_tensor_release(squares);
    gc_tensor_release(norms_sq);
    gc_tensor_release(padded);
    gc_tensor_release(inverse_norms);
    return unit;
}

/* x [N, D] in working precision, normalised for cosine. */
static gc_tensor *prepare(const gc_tensor *x, gc_similarity similarity) {
    gc_tensor *working = gc_to_working(x); /* f32 for f16 and bf16 (see the top of this file) */
    if (similarity == GC_SIMILARITY_DOT) return working;
    gc_tensor *unit = normalize_rows(working);
    gc_tensor_release(working);
    return unit;
}

gc_tensor *gc_contrastive_loss(const gc_tensor *queries, const gc_tensor *passages,
                               const gc_contrastive_options *options) {
    if (!queries || !passages) return NULL;
    check_arguments(queries, passages, options);
    int64_t n_queries = queries->shape[0], n_passages = passages->shape[0];
    /* By default query i's positive is passage i * (Np / Nq): each query is followed by
     * its hard negatives. */
    gc_tensor *default_targets =
        options->targets ? NULL
                         : gc_arange(n_queries, 0, n_queries ? (double)(n_passages / n_queries) : 0, GC_I32,
                                     queries->device);
    const gc_tensor *targets = options->targets ? options->targets : default_targets;
    gc_tensor *q = prepare(queries, options->similarity);                  /* [Nq, D] */
    gc_tensor *p = prepare(passages, options->similarity);                 /* [Np, D] */
    gc_tensor *similarities = gc_matmul(q, p, false, true);                /* [Nq, Np] */
    gc_tensor *scores = gc_div_scalar(similarities, options->temperature); /* [Nq, Np] */
    gc_tensor *loss = gc_cross_entropy(scores, targets, options->reduction);
    gc_tensor_release(default_targets);
    gc_tensor_release(q);
    gc_tensor_release(p);
    gc_tensor_release(similarities);
    gc_tensor_release(scores);
    return loss;
}

/* gc_loss_fn.forward: reps = (queries, passages), args the options. */
static gc_tensor *contrastive_forward(gc_tensor *const *reps, int count, void *args) {
    if (count != 2) gc_fatal("contrastive_loss_fn: needs 2 representations (queries, passages), got %d", count);
    return gc_contrastive_loss(reps[0], reps[1], args);
}

gc_loss_fn gc_contrastive_loss_fn(const gc_contrastive_options *options) {
    if (!options) gc_fatal("contrastive_loss_fn: options is NULL");
    /* A tiled loss with its own value_and_grad comes later; this one goes through autograd. */
    return (gc_loss_fn){.forward = contrastive_forward, .value_and_grad = NULL, .args = (void *)options};
}
