/* The in-batch contrastive (InfoNCE) loss, untiled: the readable reference, built from
 * recorded ops so that autograd differentiates it. Also the choice between it and the tiled
 * loss (contrastive_tiled.c) for value_and_grad, and the gc_loss_fn. */
#include <math.h>

#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

/* x [N, D] -> x / sqrt(||x||^2 + eps^2) per row */
static gc_tensor *normalize_rows(const gc_tensor *x) {
    gc_tensor *squares = gc_mul(x, x);
    gc_tensor *norms_sq = gc_sum_last(squares, true); /* [N, 1] */
    gc_tensor *padded = gc_add_scalar(norms_sq, GC_COSINE_EPS * GC_COSINE_EPS);
    gc_tensor *inverse_norms = gc_rsqrt(padded);
    gc_tensor *unit = gc_mul(x, inverse_norms);
    gc_tensor_release(squares);
    gc_tensor_release(norms_sq);
    gc_tensor_release(padded);
    gc_tensor_release(inverse_norms);
    return unit;
}

gc_tensor *gc_contrastive_prepare(const gc_tensor *x, gc_similarity similarity) {
    gc_tensor *working = gc_to_working(x); /* f32 for f16 and bf16: a sum of squares overflows f16 */
    if (similarity == GC_SIMILARITY_DOT) return working;
    gc_tensor *unit = normalize_rows(working);
    gc_tensor_release(working);
    return unit;
}

/* The passage -> query term: row i of scores[:, targets]^T is the positive of query i scored
 * against every query, and its target is query i. */
static gc_tensor *passage_to_query_loss(const gc_tensor *scores, const gc_tensor *targets,
                                        gc_loss_reduction reduction) {
    int64_t n_queries = scores->shape[0];
    gc_tensor *by_passage = gc_transpose(scores, 0, 1);                  /* [Np, Nq] */
    gc_tensor *positives = gc_embedding(by_passage, targets);            /* [Nq, Nq] */
    gc_tensor *diagonal = gc_arange(n_queries, 0, 1, GC_I32, scores->device);
    gc_tensor *loss = gc_cross_entropy(positives, diagonal, reduction);
    gc_tensor_release(by_passage);
    gc_tensor_release(positives);
    gc_tensor_release(diagonal);
    return loss;
}

gc_tensor *gc_contrastive_loss(const gc_tensor *queries, const gc_tensor *passages,
                               const gc_contrastive_options *options) {
    if (!queries || !passages) return NULL;
    gc_contrastive_check_arguments(queries, passages, options);
    if (gc_contrastive_positive_count(options) > 1) return gc_contrastive_multi_loss(queries, passages, options);
    gc_tensor *targets = gc_contrastive_targets(queries, passages, options); /* [Nq] */
    gc_tensor *q = gc_contrastive_prepare(queries, options->similarity);     /* [Nq, D] */
    gc_tensor *p = gc_contrastive_prepare(passages, options->similarity);    /* [Np, D] */
    gc_tensor *similarities = gc_matmul(q, p, false, true);                  /* [Nq, Np] */
    gc_tensor *scores = gc_div_scalar(similarities, options->temperature);   /* [Nq, Np] */
    gc_tensor *loss = gc_cross_entropy(scores, targets, options->reduction);
    if (options->symmetric && loss) {
        gc_tensor *backward = passage_to_query_loss(scores, targets, options->reduction);
        gc_tensor *both = gc_add(loss, backward);
        gc_tensor_release(loss);
        loss = gc_mul_scalar(both, 0.5);
        gc_tensor_release(backward);
        gc_tensor_release(both);
    }
    gc_tensor_release(targets);
    gc_tensor_release(q);
    gc_tensor_release(p);
    gc_tensor_release(similarities);
    gc_tensor_release(scores);
    return loss;
}

/* The backward is seeded with `seed` in the loss's f32, so a loss scale reaches the gradients
 * before they are rounded to 16 bits. */
gc_status gc_contrastive_autograd(gc_pair_loss loss_of, const void *args, const gc_tensor *queries,
                                  const gc_tensor *passages, const gc_contrastive_options *options, double seed,
                                  double *value, gc_tensor **grads) {
    gc_tensor *leaves[2] = {gc_detach(queries), gc_detach(passages)};
    for (int s = 0; s < 2; s++) gc_set_requires_grad(leaves[s], true);
    bool previous = gc_set_grad_enabled(true);
    gc_tensor *loss = loss_of(leaves[0], leaves[1], args);
    gc_status status = loss ? GC_OK : gc_last_status();
    if (status == GC_OK) *value = gc_item(loss); /* the one read of the device: the loss */
    if (status == GC_OK && queries->shape[0] > 0 && !isfinite(*value)) { /* no queries: nan by definition */
        int64_t rows_per_read = gc_contrastive_tile_size(options, queries->device, gc_contrastive_rows(queries, passages));
        status = gc_contrastive_explain_non_finite(queries, passages, options, *value, rows_per_read);
    }
    gc_tensor *seed_tensor =
        status == GC_OK && seed != 1 ? gc_full(loss->ndim, loss->shape, loss->dtype, loss->device, seed) : NULL;
    if (status == GC_OK && seed != 1 && !seed_tensor) status = gc_last_status();
    if (status == GC_OK) status = gc_backward(&loss, seed_tensor ? &seed_tensor : NULL, 1);
    gc_tensor_release(seed_tensor);
    gc_set_grad_enabled(previous);
    if (status == GC_OK) {
        /* A side without rows gets no gradient from the graph: its gradient is empty. */
        for (int s = 0; s < 2; s++)
            grads[s] = gc_grad(leaves[s]) ? gc_tensor_retain(gc_grad(leaves[s])) : gc_zeros_like(leaves[s]);
    }
    gc_tensor_release(loss);
    gc_tensor_release(leaves[0]);
    gc_tensor_release(leaves[1]);
    return status;
}

static gc_tensor *contrastive_pair(const gc_tensor *queries, const gc_tensor *passages, const void *options) {
    return gc_contrastive_loss(queries, passages, options);
}

gc_status gc_contrastive_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                        const gc_contrastive_options *options, double seed, double *value,
                                        gc_tensor **grad_queries, gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) return gc_contrastive_loss_tiled(queries, passages, options, seed, value, grad_queries,
                                                                grad_passages);
    gc_contrastive_check_arguments(queries, passages, options);
    if (gc_contrastive_positive_count(options) > 1)
        return gc_contrastive_multi_value_and_grad(queries, passages, options, options->method, seed, value,
                                                   grad_queries, grad_passages);
    bool tiled = options->method == GC_CONTRASTIVE_TILED ||
                 (options->method == GC_CONTRASTIVE_AUTO &&
                  gc_contrastive_rows(queries, passages) > gc_contrastive_largest_tile(options, queries->device));
    if (tiled)
        return gc_contrastive_loss_tiled(queries, passages, options, seed, value, grad_queries, grad_passages);
    gc_tensor *grads[2] = {NULL, NULL};
    gc_status status = gc_contrastive_autograd(contrastive_pair, options, queries, passages, options, seed, value,
                                               grads);
    if (status == GC_OK && (!grads[0] || !grads[1])) status = gc_last_status();
    if (status != GC_OK) {
        gc_tensor_release(grads[0]);
        gc_tensor_release(grads[1]);
        return status;
    }
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}

/* gc_loss_fn.forward and value_and_grad: reps = (queries, passages), args the options. */
static void check_count(int count) {
    if (count != 2) gc_fatal("contrastive_loss_fn: needs 2 representations (queries, passages), got %d", count);
}

static gc_tensor *contrastive_forward(gc_tensor *const *reps, int count, void *args) {
    check_count(count);
    return gc_contrastive_loss(reps[0], reps[1], args);
}

static gc_status contrastive_value_and_grad(gc_tensor *const *reps, int count, void *args, double seed,
                                            double *value, gc_tensor **grads) {
    check_count(count);
    return gc_contrastive_value_and_grad(reps[0], reps[1], args, seed, value, &grads[0], &grads[1]);
}

static gc_status contrastive_group_value_and_grad(gc_process_group *group, gc_tensor *const *reps, int count,
                                                  void *args, double seed, double *value, gc_tensor **grads) {
    check_count(count);
    return gc_contrastive_loss_ring(group, reps[0], reps[1], args, seed, value, &grads[0], &grads[1]);
}

gc_loss_fn gc_contrastive_loss_fn(const gc_contrastive_options *options) {
    if (!options) gc_fatal("contrastive_loss_fn: options is NULL");
    bool full = options->method == GC_CONTRASTIVE_FULL;
    return (gc_loss_fn){.forward = contrastive_forward,
                        .value_and_grad = full ? NULL : contrastive_value_and_grad,
                        .group_value_and_grad = contrastive_group_value_and_grad,
                        .args = (void *)options};
}
