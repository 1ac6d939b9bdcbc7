/* Guided false-negative filtering (GISTEmbed, loss.h), untiled: the student's logits over the
 * query-passage, query-query and positive-positive blocks, each plus the guide's mask
 * (gist_mask.c: 0, or -inf for a false negative), built from recorded ops so that autograd
 * differentiates it; the mask is built without a graph, the guide's scores only deciding it.
 * Also the choice between it and the tiled loss (gist_tiled.c), and the gc_loss_fn (whose ring
 * is gist_ring.c's). */
#include "gist_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

/* blocks [Nq, C_b] side by side: [Nq, sum C_b] */
static gc_tensor *side_by_side(gc_tensor *const *blocks, int count) {
    gc_tensor *columns[3] = {NULL, NULL, NULL};
    for (int b = 0; b < count; b++) columns[b] = gc_transpose(blocks[b], 0, 1);
    gc_tensor *stacked = gc_cat0(columns, count);
    gc_tensor *joined = gc_transpose(stacked, 0, 1);
    GC_RELEASE_ALL(columns[0], columns[1], columns[2], stacked);
    return joined;
}

/* The three blocks of scores (student similarity plus mask, before the temperature) side by
 * side, [Nq, Np + 2 Nq]. */
static gc_tensor *masked_logits(const gc_tensor *q, const gc_tensor *p, const gc_gist_guide *guide) {
    int64_t n_queries = q->shape[0];
    gc_tensor *positives = gc_embedding(p, guide->targets); /* [Nq, D] */
    gc_tensor *similarities[3] = {gc_matmul(q, p, false, true), gc_matmul(q, q, false, true),
                                  gc_matmul(positives, positives, false, true)};
    gc_tensor *masked[3] = {NULL, NULL, NULL};
    bool ok = true;
    for (int b = 0; b < 3 && ok; b++) {
        gc_tensor *bias = similarities[b] ? gc_gist_mask(guide, b, 0, n_queries, 0, similarities[b]->shape[1]) : NULL;
        ok = (masked[b] = gc_add(similarities[b], bias)) != NULL;
        gc_tensor_release(bias);
    }
    gc_tensor *logits = ok ? side_by_side(masked, 3) : NULL;
    for (int b = 0; b < 3; b++) GC_RELEASE_ALL(similarities[b], masked[b]);
    gc_tensor_release(positives);
    return logits;
}

gc_tensor *gc_gist_loss(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options) {
    if (!queries || !passages) return NULL;
    gc_gist_check_options(queries, passages, options);
    const gc_contrastive_options *c = &options->contrastive;
    gc_tensor *targets = gc_contrastive_targets(queries, passages, c); /* [Nq] */
    gc_tensor *q = gc_contrastive_prepare(queries, c->similarity);    /* [Nq, D] */
    gc_tensor *p = gc_contrastive_prepare(passages, c->similarity);   /* [Np, D] */
    gc_gist_guide guide = {0};
    gc_status status = targets && q && p ? gc_gist_guide_init(&guide, options, targets, q->dtype) : gc_last_status();
    gc_tensor *logits = status == GC_OK ? masked_logits(q, p, &guide) : NULL;
    gc_tensor *scores = gc_div_scalar(logits, c->temperature);
    gc_tensor *loss = scores ? gc_cross_entropy(scores, targets, c->reduction) : NULL;
    gc_gist_guide_release(&guide);
    GC_RELEASE_ALL(targets, q, p, logits, scores);
    return loss;
}

static gc_tensor *gist_pair(const gc_tensor *queries, const gc_tensor *passages, const void *options) {
    return gc_gist_loss(queries, passages, options);
}

gc_status gc_gist_value_and_grad(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options,
                                 double seed, double *value, gc_tensor **grad_queries, gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) return gc_last_status();
    gc_gist_check_options(queries, passages, options);
    const gc_contrastive_options *c = &options->contrastive;
    bool tiled = c->method == GC_CONTRASTIVE_TILED ||
                 (c->method == GC_CONTRASTIVE_AUTO &&
                  gc_contrastive_rows(queries, passages) > gc_contrastive_largest_tile(c, queries->device));
    if (tiled) return gc_gist_loss_tiled(queries, passages, options, seed, value, grad_queries, grad_passages);
    gc_tensor *grads[2] = {NULL, NULL};
    gc_status status = gc_contrastive_autograd(gist_pair, options, queries, passages, c, seed, value, grads);
    if (status != GC_OK) {
        GC_RELEASE_ALL(grads[0], grads[1]);
        return status;
    }
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}

/* gc_loss_fn over reps = (queries, passages), args the options. */
static void check_count(int count) {
    if (count != 2) gc_fatal("gist_loss_fn: needs 2 representations (queries, passages), got %d", count);
}

static gc_tensor *gist_forward(gc_tensor *const *reps, int count, void *args) {
    check_count(count);
    return gc_gist_loss(reps[0], reps[1], args);
}

static gc_status gist_value_and_grad(gc_tensor *const *reps, int count, void *args, double seed, double *value,
                                     gc_tensor **grads) {
    check_count(count);
    return gc_gist_value_and_grad(reps[0], reps[1], args, seed, value, &grads[0], &grads[1]);
}

static gc_status gist_group_value_and_grad(gc_process_group *group, gc_tensor *const *reps, int count, void *args,
                                           double seed, double *value, gc_tensor **grads) {
    check_count(count);
    return gc_gist_loss_ring(group, reps[0], reps[1], args, seed, value, &grads[0], &grads[1]);
}

gc_loss_fn gc_gist_loss_fn(const gc_gist_options *options) {
    if (!options) gc_fatal("gist_loss_fn: options is NULL");
    bool full = options->contrastive.method == GC_CONTRASTIVE_FULL;
    return (gc_loss_fn){.forward = gist_forward, .value_and_grad = full ? NULL : gist_value_and_grad,
                        .group_value_and_grad = gist_group_value_and_grad, .args = (void *)options};
}
