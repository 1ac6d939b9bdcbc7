/* Guided false-negative filtering (GISTEmbed, loss.h): the student's logits over the
 * query-passage, query-query and positive-positive blocks, each candidate the guide scores
 * above the query's positive (less the margin) masked to -inf. Built from recorded ops, so
 * autograd differentiates it; the guide's part is built without a graph: it only decides the
 * mask.
 *
 * The mask is exact without a comparison op: with d = guide score - threshold, the first
 * maximum of the pair (0, d) is d exactly when d > 0, i.e. when the score exceeds the
 * threshold (the difference of two distinct floats is never 0), and its index, 0 or 1, is the
 * mask; log(1 - mask) is then the 0 or -inf added to the student's score. */
#include <math.h>

#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"
#include "tensor/op_util.h"

static void check_guide(const gc_tensor *student, const gc_tensor *guide, const char *side) {
    char ts[128], tg[128];
    if (!guide || guide->ndim != 2 || guide->shape[0] != student->shape[0])
        gc_fatal("gist_loss: the guide's %s must be [%lld, Dg] like the student's %s, got %s", side,
                 (long long)student->shape[0], gc_tensor_str(student, ts, sizeof ts),
                 guide ? gc_tensor_str(guide, tg, sizeof tg) : "NULL");
    gc_check_float("gist_loss", guide);
    gc_check_same_device("gist_loss", student, guide);
}

static void check_options(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *o) {
    if (!o) gc_fatal("gist_loss: options is NULL");
    const gc_contrastive_options *c = &o->contrastive;
    gc_contrastive_check_arguments(queries, passages, c);
    if (gc_contrastive_positive_count(c) > 1 || c->symmetric || c->method == GC_CONTRASTIVE_TILED)
        gc_fatal("gist_loss: %lld positives, symmetric %d, method %d: one positive, one direction, untiled",
                 (long long)gc_contrastive_positive_count(c), (int)c->symmetric, (int)c->method);
    check_guide(queries, o->guide_queries, "queries");
    check_guide(passages, o->guide_passages, "passages");
    gc_check_same_dtype("gist_loss", o->guide_queries, o->guide_passages);
    if (o->guide_queries->shape[1] != o->guide_passages->shape[1])
        gc_fatal("gist_loss: the guide's queries have %lld columns, its passages %lld",
                 (long long)o->guide_queries->shape[1], (long long)o->guide_passages->shape[1]);
    if (o->margin_strategy != GC_GIST_ABSOLUTE && o->margin_strategy != GC_GIST_RELATIVE)
        gc_fatal("gist_loss: unknown margin strategy %d", (int)o->margin_strategy);
    if (!isfinite(o->margin)) gc_fatal("gist_loss: margin %g is not finite", o->margin);
}

/* The threshold [Nq, 1] of each query: the guide's score of its positive, guide_qp[i, t_i]
 * (picked out of the very matrix the candidates' scores come from, so a duplicate of the
 * positive ties with it exactly), less the margin. */
static gc_tensor *thresholds(const gc_tensor *guide_qp, const gc_tensor *targets, const gc_gist_options *o) {
    int64_t rows = guide_qp->shape[0], cols = guide_qp->shape[1];
    gc_tensor *flat = gc_reshape(guide_qp, GC_SHAPE(rows * cols, 1));
    gc_tensor *row_starts = gc_arange(rows, 0, (double)cols, GC_I32, guide_qp->device);
    gc_tensor *at = gc_add(row_starts, targets); /* i32 [Nq]: i Np + t_i */
    gc_tensor *positive = gc_embedding(flat, at); /* [Nq, 1] */
    gc_tensor *threshold = o->margin_strategy == GC_GIST_ABSOLUTE ? gc_sub_scalar(positive, o->margin)
                                                                  : gc_mul_scalar(positive, 1 - o->margin);
    GC_RELEASE_ALL(flat, row_starts, at, positive);
    return threshold;
}

/* [R, C] of `dtype`: -inf where guide [R, C] > threshold [R, 1], else 0; never at (i, exempt[i])
 * when exempt (i32 [R]) is given. */
static gc_tensor *mask_bias(const gc_tensor *guide, const gc_tensor *threshold, const gc_tensor *exempt,
                            gc_dtype dtype) {
    int64_t rows = guide->shape[0], cols = guide->shape[1];
    gc_tensor *excess = gc_sub(guide, threshold); /* d */
    gc_tensor *zeros = gc_zeros_like(excess);
    gc_tensor *pair[2] = {gc_reshape(zeros, GC_SHAPE(1, rows, cols)), gc_reshape(excess, GC_SHAPE(1, rows, cols))};
    gc_tensor *stacked = gc_cat0(pair, 2); /* [2, R, C] */
    gc_tensor *last = gc_permute(stacked, (const int[]){1, 2, 0}); /* [R, C, 2]: (0, d) per pair */
    gc_tensor *index = NULL;
    gc_tensor *largest = last ? gc_max_last(last, false, &index) : NULL;
    gc_tensor *masked = largest ? gc_cast(index, dtype) : NULL; /* 1 where d > 0 */
    gc_tensor *ones = exempt ? gc_ones(GC_SHAPE(rows), dtype, guide->device) : NULL;
    gc_tensor *positive = exempt ? gc_scatter_last(ones, exempt, cols) : NULL; /* one-hot [R, C] */
    gc_tensor *others = exempt ? gc_rsub_scalar(positive, 1) : NULL;
    gc_tensor *candidates = exempt ? gc_mul(masked, others) : gc_tensor_retain(masked); /* the positive unmasked */
    gc_tensor *keep = gc_rsub_scalar(candidates, 1); /* 1 kept, 0 masked */
    gc_tensor *bias = gc_log(keep);
    GC_RELEASE_ALL(excess, zeros, pair[0], pair[1], stacked, last, index, largest, masked, ones, positive, others,
                   candidates, keep);
    return bias;
}

/* The guide's masks of the three blocks, in the student's working dtype: bias[0] [Nq, Np]
 * (the positive exempt), bias[1] [Nq, Nq], bias[2] [Nq, Nq]. False on an allocation error. */
static bool guide_masks(const gc_gist_options *o, const gc_tensor *targets, gc_dtype dtype, gc_tensor **bias) {
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *q = gc_contrastive_prepare(o->guide_queries, GC_SIMILARITY_COSINE);  /* [Nq, Dg] */
    gc_tensor *p = gc_contrastive_prepare(o->guide_passages, GC_SIMILARITY_COSINE); /* [Np, Dg] */
    gc_tensor *positives = gc_embedding(p, targets);                                 /* [Nq, Dg] */
    gc_tensor *scores[3] = {gc_matmul(q, p, false, true), gc_matmul(q, q, false, true),
                            gc_matmul(positives, positives, false, true)};
    gc_tensor *threshold = scores[0] ? thresholds(scores[0], targets, o) : NULL;
    bool ok = threshold != NULL;
    for (int b = 0; b < 3; b++) {
        bias[b] = ok ? mask_bias(scores[b], threshold, b == 0 ? targets : NULL, dtype) : NULL;
        ok = ok && bias[b];
    }
    GC_RELEASE_ALL(q, p, positives, scores[0], scores[1], scores[2], threshold);
    gc_set_grad_enabled(previous);
    for (int b = 0; b < 3 && !ok; b++) gc_tensor_release(bias[b]);
    return ok;
}

/* blocks [Nq, C_b] side by side: [Nq, sum C_b] */
static gc_tensor *side_by_side(gc_tensor *const *blocks, int count) {
    gc_tensor *columns[3] = {NULL, NULL, NULL};
    for (int b = 0; b < count; b++) columns[b] = gc_transpose(blocks[b], 0, 1);
    gc_tensor *stacked = gc_cat0(columns, count);
    gc_tensor *joined = gc_transpose(stacked, 0, 1);
    GC_RELEASE_ALL(columns[0], columns[1], columns[2], stacked);
    return joined;
}

gc_tensor *gc_gist_loss(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options) {
    if (!queries || !passages) return NULL;
    check_options(queries, passages, options);
    const gc_contrastive_options *c = &options->contrastive;
    gc_tensor *targets = gc_contrastive_targets(queries, passages, c); /* [Nq] */
    gc_tensor *q = gc_contrastive_prepare(queries, c->similarity);    /* [Nq, D] */
    gc_tensor *p = gc_contrastive_prepare(passages, c->similarity);   /* [Np, D] */
    gc_tensor *positives = gc_embedding(p, targets);                  /* [Nq, D] */
    gc_tensor *bias[3] = {NULL, NULL, NULL}, *masked[3] = {NULL, NULL, NULL};
    gc_tensor *similarities[3] = {gc_matmul(q, p, false, true), gc_matmul(q, q, false, true),
                                  gc_matmul(positives, positives, false, true)};
    bool ok = similarities[0] && similarities[1] && similarities[2] &&
              guide_masks(options, targets, similarities[0]->dtype, bias);
    for (int b = 0; b < 3 && ok; b++) ok = (masked[b] = gc_add(similarities[b], bias[b])) != NULL;
    gc_tensor *logits = ok ? side_by_side(masked, 3) : NULL; /* [Nq, Np + 2 Nq] */
    gc_tensor *scores = gc_div_scalar(logits, c->temperature);
    gc_tensor *loss = scores ? gc_cross_entropy(scores, targets, c->reduction) : NULL;
    for (int b = 0; b < 3; b++) GC_RELEASE_ALL(bias[b], masked[b], similarities[b]);
    GC_RELEASE_ALL(targets, q, p, positives, logits, scores);
    return loss;
}

/* gc_loss_fn over reps = (queries, passages), args the options. */
static void check_count(int count) {
    if (count != 2) gc_fatal("gist_loss_fn: needs 2 representations (queries, passages), got %d", count);
}

static gc_tensor *gist_pair(const gc_tensor *queries, const gc_tensor *passages, const void *options) {
    return gc_gist_loss(queries, passages, options);
}

static gc_tensor *gist_forward(gc_tensor *const *reps, int count, void *args) {
    check_count(count);
    return gc_gist_loss(reps[0], reps[1], args);
}

static gc_status gist_value_and_grad(gc_tensor *const *reps, int count, void *args, double seed, double *value,
                                     gc_tensor **grads) {
    check_count(count);
    const gc_gist_options *o = args;
    check_options(reps[0], reps[1], o);
    return gc_contrastive_autograd(gist_pair, o, reps[0], reps[1], &o->contrastive, seed, value, grads);
}

gc_loss_fn gc_gist_loss_fn(const gc_gist_options *options) {
    if (!options) gc_fatal("gist_loss_fn: options is NULL");
    bool full = options->contrastive.method == GC_CONTRASTIVE_FULL;
    return (gc_loss_fn){.forward = gist_forward, .value_and_grad = full ? NULL : gist_value_and_grad,
                        .args = (void *)options};
}
