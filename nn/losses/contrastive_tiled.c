/* The tiled contrastive loss (Inf-CL, arXiv 2410.17243): the value of the InfoNCE loss and
 * its gradients with respect to the representations, computed one tile of queries x
 * passages at a time, so that the Nq x Np score matrix never exists (docs/DESIGN.md).
 *
 * Notation: q_i, p_j the representations (rows), s_ij = (q_i . p_j) a_i b_j the score, where
 * the scales a_i = r_i / T and b_j = r'_j hold the temperature T and, for cosine, the inverse
 * norms r = 1 / sqrt(||x||^2 + eps^2) (for dot, a_i = 1 / T and b_j = 1). So a tile's scores
 * are one matmul of raw representations, scaled element by element: nothing [N, D] is copied.
 *
 * Forward: per query row, the running log-sum-exp (max, sum) of its scores over the passage
 * tiles, and the score of its positive; when symmetric, the same per passage column.
 *   loss = w sum_i (lse_i - s_i,t_i) [+ w sum_i (lse'_t_i - s_i,t_i) when symmetric]
 * with w = 1 (sum) or 1 / Nq (mean), halved when symmetric.
 * Gradient: each tile's scores again, then g_ij = d loss / d s_ij from the saved lse's
 *   g_ij = w softmax_row_ij + [symmetric] w n_j softmax_col_ij - w (1 + [symmetric]) [j = t_i]
 * (n_j: how many queries have passage j as their positive), and h_ij = g_ij a_i b_j, the
 * gradient with respect to the dot products, accumulates into both sides' gradients:
 *   grad_q_i += sum_j h_ij p_j,   grad_p_j += sum_i h_ij q_i   (two matmuls per tile).
 * For cosine, the scales depend on the rows too: ds_ij / dr_i = s_ij / r_i and
 * dr_i / dq_i = -r_i^3 q_i, which adds -(sum_j g_ij s_ij) r_i^2 q_i to grad_q_i; and
 * sum_j g_ij s_ij = grad_q_i . q_i (the accumulated dot-product gradient), so the whole
 * normalisation backward is one pass at the end: grad -= (grad . x) r^2 x, per row.
 * The same on the passage side. */
#include <math.h>

#include "contrastive_tiles.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"

typedef struct tiled_loss {
    const gc_contrastive_options *options;
    gc_loss_side queries, passages;
    gc_loss_tiles tiles;
    double seed; /* what the gradients are multiplied by: 1 or a loss scale */
} tiled_loss;

/* --- preparation --- */

/* col_weight [Np] = w n_j: n_j counted by scattering a one per query onto its positive. */
static gc_tensor *column_weights(const tiled_loss *loss) {
    const gc_loss_side *q = &loss->queries;
    int64_t n_passages = gc_loss_side_count(&loss->passages);
    gc_tensor *ones = gc_ones(GC_SHAPE(gc_loss_side_count(q), 1), q->reps->dtype, q->reps->device);
    gc_tensor *counts = gc_embedding_backward(ones, q->targets, n_passages); /* [Np, 1] */
    gc_tensor *flat = gc_reshape(counts, GC_SHAPE(n_passages));
    gc_tensor *weights = gc_mul_scalar(flat, loss->tiles.weight);
    GC_RELEASE_ALL(ones, counts, flat);
    return weights;
}

static gc_status prepare(tiled_loss *loss, const gc_tensor *queries, const gc_tensor *passages) {
    const gc_contrastive_options *o = loss->options;
    gc_loss_side *q = &loss->queries, *p = &loss->passages;
    bool symmetric = loss->tiles.symmetric;
    int64_t tile = loss->tiles.tile;
    gc_status status = gc_loss_side_prepare(q, queries, o->similarity, 1.0 / o->temperature, tile, true);
    if (status == GC_OK) status = gc_loss_side_prepare(p, passages, o->similarity, 1.0, tile, true);
    if (status == GC_OK) status = gc_loss_side_start_lse(q);
    if (status == GC_OK && symmetric) status = gc_loss_side_start_lse(p);
    if (status == GC_OK)
        status = gc_loss_tiles_init(&loss->tiles, tile, gc_loss_side_count(q), gc_loss_side_count(p), q->reps->dtype,
                                    q->reps->device);
    if (status != GC_OK) return status;
    q->targets = gc_contrastive_targets(queries, passages, o);
    q->target_score = gc_empty(GC_SHAPE(gc_loss_side_count(q)), q->reps->dtype, q->reps->device);
    if (symmetric && q->targets) p->col_weight = column_weights(loss);
    bool ok = q->targets && q->target_score && (!symmetric || p->col_weight);
    return ok ? GC_OK : gc_last_status();
}

/* --- the loss from the log-sum-exps --- */

/* sum_i (lse'_t_i - s_i,t_i): the passage -> query terms, each passage's column lse
 * gathered at the queries' positives. */
static gc_tensor *passage_terms_total(const tiled_loss *loss) {
    const gc_loss_side *q = &loss->queries, *p = &loss->passages;
    gc_tensor *column = gc_reshape(p->lse, GC_SHAPE(gc_loss_side_count(p), 1));
    gc_tensor *picked = gc_embedding(column, q->targets); /* [Nq, 1] */
    gc_tensor *flat = gc_reshape(picked, GC_SHAPE(gc_loss_side_count(q)));
    gc_tensor *terms = gc_sub(flat, q->target_score);
    gc_tensor *total = gc_sum_all(terms);
    GC_RELEASE_ALL(column, picked, flat, terms);
    return total;
}

/* The loss from the log-sum-exps (which it completes) and the positives' scores. */
static gc_status loss_value(tiled_loss *loss, double *value) {
    gc_loss_side *q = &loss->queries, *p = &loss->passages;
    bool symmetric = loss->tiles.symmetric;
    q->lse = gc_loss_side_lse(q);
    if (symmetric) p->lse = gc_loss_side_lse(p);
    gc_tensor *terms = gc_sub(q->lse, q->target_score);
    gc_tensor *total = gc_sum_all(terms);
    gc_tensor *passage_total = symmetric && p->lse ? passage_terms_total(loss) : NULL;
    /* both directions summed on the device: one read of it per loss */
    gc_tensor *both = passage_total ? gc_add(total, passage_total) : gc_tensor_retain(total);
    gc_status status = both && (!symmetric || passage_total) ? GC_OK : gc_last_status();
    if (status == GC_OK) *value = loss->tiles.weight * gc_item(both);
    GC_RELEASE_ALL(terms, total, passage_total, both);
    return status;
}

/* Everything after the checks, under no-grad. */
static gc_status run(tiled_loss *loss, const gc_tensor *queries, const gc_tensor *passages, double *value,
                     gc_tensor **grads) {
    gc_status status = prepare(loss, queries, passages);
    if (status != GC_OK) return status;
    gc_loss_tiles_fold(&loss->tiles, &loss->queries, &loss->passages, 0);
    status = loss_value(loss, value);
    if (status == GC_OK && gc_loss_side_count(&loss->queries) > 0 && !isfinite(*value))
        status = gc_contrastive_explain_non_finite(queries, passages, loss->options, *value, loss->tiles.tile);
    if (status != GC_OK) return status;
    gc_loss_tiles_differentiate(&loss->tiles, &loss->queries, &loss->passages, 0);
    status = gc_loss_side_normalisation_backward(&loss->queries, loss->tiles.tile);
    if (status == GC_OK) status = gc_loss_side_normalisation_backward(&loss->passages, loss->tiles.tile);
    if (status != GC_OK) return status;
    grads[0] = gc_loss_seeded(loss->queries.grad, loss->seed, queries->dtype);
    grads[1] = gc_loss_seeded(loss->passages.grad, loss->seed, passages->dtype);
    return grads[0] && grads[1] ? GC_OK : gc_last_status();
}

gc_status gc_contrastive_loss_tiled(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_contrastive_options *options, double seed, double *value,
                                    gc_tensor **grad_queries, gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) {
        if (gc_last_status() == GC_OK) gc_fatal("contrastive_loss_tiled: queries or passages is NULL");
        return gc_last_status(); /* the error that made an input NULL */
    }
    gc_contrastive_check_arguments(queries, passages, options);
    if (gc_contrastive_positive_count(options) > 1) /* one tiled loss per positive */
        return gc_contrastive_multi_value_and_grad(queries, passages, options, GC_CONTRASTIVE_TILED, seed, value,
                                                   grad_queries, grad_passages);
    int64_t tile = gc_contrastive_tile_size(options, queries->device, gc_contrastive_rows(queries, passages));
    tiled_loss loss = {.options = options,
                       .tiles = {.tile = tile,
                                 .weight = gc_contrastive_weight(options, queries->shape[0]),
                                 .symmetric = options->symmetric},
                       .seed = seed};
    gc_tensor *grads[2] = {NULL, NULL};
    bool previous = gc_set_grad_enabled(false);
    gc_status status = run(&loss, queries, passages, value, grads);
    gc_set_grad_enabled(previous);
    gc_loss_side_release(&loss.queries);
    gc_loss_side_release(&loss.passages);
    gc_loss_tiles_release(&loss.tiles);
    if (status != GC_OK) {
        GC_RELEASE_ALL(grads[0], grads[1]);
        return status;
    }
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}
