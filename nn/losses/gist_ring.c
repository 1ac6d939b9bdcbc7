/* The GIST loss around the ring (gc_gist_loss_ring, loss.h): the ring contrastive loss's
 * passes (contrastive_ring.h) over blocks that carry, after a rank's passages, its queries and
 * its queries' positives -- the columns of the guided logits' other two blocks -- and the
 * guide's unit rows of all three, so that each rank masks each tile exactly as the tiled loss
 * (gist_tiled.c) masks the same tile of the gathered batch (gist_mask.c).
 *
 * Row i of every block of logits is query i's, and its log-sum-exp is one: the rows of blocks 0
 * and 1 are this rank's queries, those of block 2 its queries' positives, sharing the queries'
 * running sums. A rank's queries and positives are columns too, travelling in its block: their
 * gradient as columns comes home with the block's, and is added to their gradient as rows;
 * each positive's then to its passage's. So a query's positive must be one of its own rank's
 * passages (as with one process's examples split over the ranks): the positives' rows are
 * picked from them. */
#include "contrastive_ring.h"
#include "gist_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"
#include "tensor/op_util.h"

#define OP "gist_loss_ring"

struct ring_gist {
    const gc_gist_options *options;
    gc_loss_side positives; /* the rows of block 2 [nq, D]: this rank's queries' positives, scale 1 / T */
    gc_tensor *own_targets; /* i32 [nq]: each query's positive among this rank's passages */
    gc_gist_guide guide;    /* this rank's rows' guide; its columns those of the block being tiled */
    gc_tensor *own_guide;   /* [np + 2 nq, Dg]: the guide's unit rows of this rank's block */
    int block;              /* the block of logits being tiled: the mask's */
    gc_status mask_status;  /* the first allocation error of a mask */
};

static gc_tensor *block_mask(void *user, int64_t row, int64_t rows, int64_t col, int64_t cols) {
    ring_gist *gist = user;
    gc_tensor *bias = gc_gist_mask(&gist->guide, gist->block, row, rows, col, cols);
    if (!bias && gist->mask_status == GC_OK) gist->mask_status = gc_last_status();
    return bias;
}

void gc_ring_gist_attach(ring_loss *loss) {
    loss->guide_dim = loss->gist->options->guide_queries->shape[1];
    loss->tiles.mask = block_mask;
    loss->tiles.mask_user = loss->gist;
}

gc_tensor *gc_ring_gist_own_guide(const ring_loss *loss) { return loss->gist->own_guide; }

gc_status gc_ring_gist_status(const ring_loss *loss) { return loss->gist->mask_status; }

/* The global targets of this rank's queries as rows of its own passages (i32 [nq]), checked to
 * be there. */
static gc_tensor *own_targets(const ring_loss *loss) {
    int64_t first = loss->passage_start[loss->rank], count = loss->passage_count[loss->rank];
    gc_tensor *wide = gc_cast(loss->queries.targets, GC_F64); /* exact for any i32 */
    gc_tensor *shifted = gc_sub_scalar(wide, (double)first);
    gc_tensor *own = gc_cast(shifted, GC_I32);
    GC_RELEASE_ALL(wide, shifted);
    /* a positive on another rank: the positives' rows could not be picked here */
    if (own) gc_check_index_range(OP " (a query's positive among its own rank's passages)", "positive", own, count);
    return own;
}

gc_status gc_ring_gist_prepare(ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages,
                               gc_tensor **block) {
    ring_gist *gist = loss->gist;
    const gc_contrastive_options *c = &gist->options->contrastive;
    gc_loss_side *q = &loss->queries, *r = &gist->positives;
    *block = NULL;
    gist->own_targets = own_targets(loss);
    gc_tensor *chosen = gist->own_targets ? gc_embedding(passages, gist->own_targets) : NULL; /* [nq, D] */
    gc_status status = chosen ? gc_loss_side_prepare(r, chosen, c->similarity, 1.0 / c->temperature, loss->tiles.tile,
                                                     true)
                              : gc_last_status();
    if (status == GC_OK) {
        /* row i of block 2 is query i's: its log-sum-exp, its target (no column of block 2 is one) */
        r->max = gc_tensor_retain(q->max);
        r->sum = gc_tensor_retain(q->sum);
        r->targets = gc_tensor_retain(q->targets);
        r->target_score = gc_tensor_retain(q->target_score);
        status = gc_gist_guide_init(&gist->guide, gist->options, gist->own_targets, q->reps->dtype);
    }
    if (status == GC_OK) {
        gc_tensor *rows[3] = {(gc_tensor *)passages, (gc_tensor *)queries, chosen};
        gc_tensor *guide_rows[3] = {gist->guide.passages, gist->guide.queries, gist->guide.positives};
        *block = gc_cat0(rows, 3);
        gist->own_guide = gc_cat0(guide_rows, 3);
        status = *block && gist->own_guide ? GC_OK : gc_last_status();
    }
    gc_tensor_release(chosen);
    return status;
}

void gc_ring_gist_visit(ring_loss *loss, const gc_loss_side *cols, const gc_tensor *guide, int owner,
                        bool differentiate) {
    ring_gist *gist = loss->gist;
    int64_t n_passages = loss->passage_count[owner], n_queries = (loss->block_rows[owner] - n_passages) / 2;
    int64_t bounds[4] = {0, n_passages, n_passages + n_queries, n_passages + 2 * n_queries};
    /* the columns of the global logits [Np | Nq | Nq] the block's parts are: only block 0 holds targets */
    int64_t starts[3] = {loss->passage_start[owner], loss->total_passages + loss->query_starts[owner],
                         loss->total_passages + loss->total_queries + loss->query_starts[owner]};
    const gc_loss_side *rows[3] = {&loss->queries, &loss->queries, &gist->positives};
    if (differentiate && !gist->positives.lse) gist->positives.lse = gc_tensor_retain(loss->queries.lse);
    /* the own targets are rows of this rank's passages: the owner's column j is row
     * passage_start[owner] - passage_start[rank] + j of them */
    gist->guide.column_offset = loss->passage_start[owner] - loss->passage_start[loss->rank];
    for (gist->block = 0; gist->block < 3 && gist->mask_status == GC_OK; gist->block++) {
        int b = gist->block;
        gc_loss_side part = gc_loss_side_rows(cols, bounds[b], bounds[b + 1]);
        gc_tensor *guide_part = gc_slice0(guide, bounds[b], bounds[b + 1]);
        gist->guide.columns[b] = guide_part;
        if (differentiate) gc_loss_tiles_differentiate(&loss->tiles, rows[b], &part, starts[b]);
        else gc_loss_tiles_fold(&loss->tiles, rows[b], &part, starts[b]);
        gist->guide.columns[b] = NULL;
        gc_tensor_release(guide_part);
        gc_loss_side_release(&part);
    }
}

gc_status gc_ring_gist_gradients(ring_loss *loss, gc_tensor **grad_queries, gc_tensor **grad_passages) {
    ring_gist *gist = loss->gist;
    gc_loss_side *r = &gist->positives;
    gc_tensor *block = loss->passages.grad; /* [np + 2 nq, D], complete and normalised */
    int64_t n_passages = loss->passage_count[loss->rank], n_queries = gc_loss_side_count(&loss->queries);
    gc_status status = gc_loss_side_normalisation_backward(r, loss->tiles.tile);
    gc_tensor *as_queries = gc_slice0(block, n_passages, n_passages + n_queries);
    gc_tensor *as_positives = gc_slice0(block, n_passages + n_queries, n_passages + 2 * n_queries);
    gc_tensor *own = gc_slice0(block, 0, n_passages);
    if (status == GC_OK) status = as_positives ? gc_add_inplace(r->grad, as_positives) : gc_last_status();
    gc_tensor *scattered = status == GC_OK ? gc_embedding_backward(r->grad, gist->own_targets, n_passages) : NULL;
    *grad_queries = status == GC_OK ? gc_add(loss->queries.grad, as_queries) : NULL;
    *grad_passages = scattered ? gc_add(own, scattered) : NULL;
    GC_RELEASE_ALL(as_queries, as_positives, own, scattered);
    if (status == GC_OK && *grad_queries && *grad_passages) return GC_OK;
    if (status == GC_OK) status = gc_last_status();
    GC_RELEASE_ALL(*grad_queries, *grad_passages);
    *grad_queries = *grad_passages = NULL;
    return status;
}

gc_status gc_gist_loss_ring(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                            const gc_gist_options *options, double seed, double *value, gc_tensor **grad_queries,
                            gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) {
        if (gc_last_status() == GC_OK) gc_fatal(OP ": queries or passages is NULL");
        return gc_last_status(); /* the error that made an input NULL */
    }
    if (!group) gc_fatal(OP ": no process group");
    if (!options) gc_fatal(OP ": options is NULL");
    gc_contrastive_check_options(queries, passages, &options->contrastive);
    gc_gist_check_guide(queries, passages, options);
    ring_gist gist = {.options = options};
    gc_status status = gc_ring_loss_run(group, queries, passages, &options->contrastive, &gist, (ring_target){0, 1}, seed, value, grad_queries,
                                   grad_passages);
    gc_loss_side_release(&gist.positives);
    gc_gist_guide_release(&gist.guide);
    GC_RELEASE_ALL(gist.own_targets, gist.own_guide);
    return status;
}
