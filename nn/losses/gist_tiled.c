/* The GIST loss tiled (loss.h): the three blocks of its logits -- queries x passages,
 * queries x queries, positives x positives -- folded tile by tile into one running
 * log-sum-exp per query, each tile's scores plus the guide's mask of the same tile
 * (gist_mask.c), computed when the tile is, so neither the student's nor the guide's Nq x Np
 * scores ever exist. The tiles are the contrastive loss's (contrastive_tiles.h; the formulas
 * are at the top of contrastive_tiled.c): a masked score is -inf, adds nothing to its row's
 * log-sum-exp and gets a zero gradient.
 *
 * Each block is a pair of sides: a side of rows (scale 1 / T, times cosine's inverse norms)
 * and a side of columns (scale 1, times the norms). The queries are the rows of blocks 0 and 1
 * and the columns of block 1, the positives (the passages picked by the targets) the rows and
 * columns of block 2: a side used twice has two scales and one gradient, and the positives'
 * gradient is added into their passages' at the end. The positives' rows share the queries'
 * log-sum-exp: row i of every block is query i's. */
#include <math.h>

#include "contrastive_tiles.h"
#include "gist_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"

typedef struct gist_tiled {
    const gc_gist_options *options;
    gc_loss_side queries, passages;        /* rows of blocks 0, 1; columns of block 0 */
    gc_loss_side query_columns;            /* columns of block 1: the queries' gradient */
    gc_loss_side positives, positive_columns; /* rows and columns of block 2 [Nq, D] */
    gc_loss_tiles tiles;
    gc_gist_guide guide;
    int block;             /* the block being tiled: the mask's */
    gc_status mask_status; /* the first allocation error of a mask */
    double seed;
} gist_tiled;

static gc_tensor *block_mask(void *user, int64_t row, int64_t rows, int64_t col, int64_t cols) {
    gist_tiled *loss = user;
    gc_tensor *bias = gc_gist_mask(&loss->guide, loss->block, row, rows, col, cols);
    if (!bias && loss->mask_status == GC_OK) loss->mask_status = gc_last_status();
    return bias;
}

/* The second use of a side: its rows, norms and gradient shared, a scale of its own. */
static gc_status share(gc_loss_side *second, const gc_loss_side *first, const gc_tensor *x, gc_similarity similarity,
                       double factor, int64_t chunk) {
    gc_status status = gc_loss_side_prepare(second, x, similarity, factor, chunk, false);
    second->grad = gc_tensor_retain(first->grad);
    return status;
}

static gc_status prepare(gist_tiled *loss, const gc_tensor *queries, const gc_tensor *passages) {
    const gc_contrastive_options *c = &loss->options->contrastive;
    gc_loss_side *q = &loss->queries, *p = &loss->passages, *r = &loss->positives;
    int64_t tile = loss->tiles.tile, n_queries = queries->shape[0];
    gc_status status = gc_loss_side_prepare(q, queries, c->similarity, 1.0 / c->temperature, tile, true);
    if (status == GC_OK) status = gc_loss_side_prepare(p, passages, c->similarity, 1.0, tile, true);
    if (status == GC_OK) status = share(&loss->query_columns, q, queries, c->similarity, 1.0, tile);
    if (status == GC_OK) status = gc_loss_side_start_lse(q);
    if (status != GC_OK) return status;
    q->targets = gc_contrastive_targets(queries, passages, c);
    q->target_score = gc_empty(GC_SHAPE(n_queries), q->reps->dtype, q->reps->device);
    gc_tensor *chosen = gc_embedding(passages, q->targets); /* [Nq, D]: the positives */
    status = chosen && q->target_score ? GC_OK : gc_last_status();
    if (status == GC_OK) status = gc_loss_side_prepare(r, chosen, c->similarity, 1.0 / c->temperature, tile, true);
    if (status == GC_OK) status = share(&loss->positive_columns, r, chosen, c->similarity, 1.0, tile);
    gc_tensor_release(chosen);
    if (status != GC_OK) return status;
    /* row i of block 2 is query i's: its log-sum-exp, its target (no column of block 2 is one) */
    r->max = gc_tensor_retain(q->max);
    r->sum = gc_tensor_retain(q->sum);
    r->targets = gc_tensor_retain(q->targets);
    r->target_score = gc_tensor_retain(q->target_score);
    int64_t widest = passages->shape[0] > n_queries ? passages->shape[0] : n_queries;
    status = gc_loss_tiles_init(&loss->tiles, tile, n_queries, widest, q->reps->dtype, q->reps->device);
    return status == GC_OK ? gc_gist_guide_init(&loss->guide, loss->options, q->targets, q->reps->dtype) : status;
}

/* Folds (forward) or differentiates every tile of the three blocks. */
static gc_status over_blocks(gist_tiled *loss, bool differentiate) {
    int64_t n_passages = gc_loss_side_count(&loss->passages), n_queries = gc_loss_side_count(&loss->queries);
    const gc_loss_side *rows[3] = {&loss->queries, &loss->queries, &loss->positives};
    const gc_loss_side *cols[3] = {&loss->passages, &loss->query_columns, &loss->positive_columns};
    /* the blocks' columns follow one another in the logits: only block 0 holds targets */
    int64_t starts[3] = {0, n_passages, n_passages + n_queries};
    for (loss->block = 0; loss->block < 3 && loss->mask_status == GC_OK; loss->block++) {
        if (differentiate) gc_loss_tiles_differentiate(&loss->tiles, rows[loss->block], cols[loss->block], starts[loss->block]);
        else gc_loss_tiles_fold(&loss->tiles, rows[loss->block], cols[loss->block], starts[loss->block]);
    }
    return loss->mask_status;
}

static gc_status loss_value(gist_tiled *loss, double *value) {
    gc_loss_side *q = &loss->queries;
    q->lse = gc_loss_side_lse(q);
    loss->positives.lse = gc_tensor_retain(q->lse);
    gc_tensor *terms = gc_sub(q->lse, q->target_score);
    gc_tensor *total = gc_sum_all(terms);
    gc_status status = total ? GC_OK : gc_last_status();
    if (status == GC_OK) *value = loss->tiles.weight * gc_item(total);
    GC_RELEASE_ALL(terms, total);
    return status;
}

/* The positives' gradient [Nq, D] added into their passages' rows. */
static gc_status add_positives_gradient(gist_tiled *loss) {
    gc_tensor *scattered = gc_embedding_backward(loss->positives.grad, loss->queries.targets,
                                                 gc_loss_side_count(&loss->passages)); /* [Np, D] */
    gc_status status = scattered ? gc_add_inplace(loss->passages.grad, scattered) : gc_last_status();
    gc_tensor_release(scattered);
    return status;
}

/* Everything after the checks, under no-grad. */
static gc_status run(gist_tiled *loss, const gc_tensor *queries, const gc_tensor *passages, double *value,
                     gc_tensor **grads) {
    gc_status status = prepare(loss, queries, passages);
    if (status == GC_OK) status = over_blocks(loss, false);
    if (status == GC_OK) status = loss_value(loss, value);
    if (status == GC_OK && queries->shape[0] > 0 && !isfinite(*value))
        status = gc_contrastive_explain_non_finite(queries, passages, &loss->options->contrastive, *value,
                                                   loss->tiles.tile);
    if (status == GC_OK) status = over_blocks(loss, true);
    if (status == GC_OK) status = gc_loss_side_normalisation_backward(&loss->queries, loss->tiles.tile);
    if (status == GC_OK) status = gc_loss_side_normalisation_backward(&loss->passages, loss->tiles.tile);
    if (status == GC_OK) status = gc_loss_side_normalisation_backward(&loss->positives, loss->tiles.tile);
    if (status == GC_OK) status = add_positives_gradient(loss);
    if (status != GC_OK) return status;
    grads[0] = gc_loss_seeded(loss->queries.grad, loss->seed, queries->dtype);
    grads[1] = gc_loss_seeded(loss->passages.grad, loss->seed, passages->dtype);
    return grads[0] && grads[1] ? GC_OK : gc_last_status();
}

gc_status gc_gist_loss_tiled(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options,
                             double seed, double *value, gc_tensor **grad_queries, gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) {
        if (gc_last_status() == GC_OK) gc_fatal("gist_loss_tiled: queries or passages is NULL");
        return gc_last_status();
    }
    gc_gist_check_options(queries, passages, options);
    const gc_contrastive_options *c = &options->contrastive;
    gist_tiled loss = {.options = options,
                       .tiles = {.tile = gc_contrastive_tile_size(c, queries->device, gc_contrastive_rows(queries, passages)),
                                 .weight = gc_contrastive_weight(c, queries->shape[0])},
                       .seed = seed};
    loss.tiles.mask = block_mask;
    loss.tiles.mask_user = &loss;
    gc_tensor *grads[2] = {NULL, NULL};
    bool previous = gc_set_grad_enabled(false);
    gc_status status = run(&loss, queries, passages, value, grads);
    gc_set_grad_enabled(previous);
    gc_loss_side *sides[5] = {&loss.queries, &loss.passages, &loss.query_columns, &loss.positives,
                              &loss.positive_columns};
    for (int s = 0; s < 5; s++) gc_loss_side_release(sides[s]);
    gc_loss_tiles_release(&loss.tiles);
    gc_gist_guide_release(&loss.guide);
    if (status != GC_OK) {
        GC_RELEASE_ALL(grads[0], grads[1]);
        return status;
    }
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}
