/* The passes of the ring contrastive loss around the process group (contrastive_ring.h).
 *
 * At step t (0 .. N-1) rank r holds the block of rank r - t. It starts that block's transfer
 * to rank r + 1, into the buffer where r + 1 will hold it at step t + 1, then computes the
 * block's tiles against its own queries, then waits: the next block moves while this one is
 * computed. What the tiles add to -- a block's running column sums (forward, symmetric) and
 * its gradient (backward) -- arrives from rank r - 1 with the block's sum over the ranks
 * before, takes this rank's tiles, and goes on to rank r + 1 once they are done; at the last
 * step rank r hands on the complete sums of block r + 1 to their owner and receives its own. */
#include <math.h>
#include <stdio.h>

#include "contrastive_ring.h"
#include "gradcache/ops.h"

static int wrap(int i, int world) { return ((i % world) + world) % world; }

/* The rank whose block rank r holds at step t. */
static int block_at(const ring_loss *loss, int t) { return wrap(loss->rank - t, loss->world); }

/* This rank's own block, with the first k rows of its vectors (views). */
static ring_block own_block(const ring_loss *loss, int k) {
    return (ring_block){gc_tensor_retain(loss->passages.reps), gc_slice0(loss->own_vectors, 0, k),
                        loss->gist ? gc_tensor_retain(gc_ring_gist_own_guide(loss)) : NULL};
}

/* Where rank `owner`'s block arrives: the front of slot `slot` of the arrival buffers. */
static ring_block arrival(const ring_loss *loss, int slot, int owner, int k) {
    int64_t n = loss->block_rows[owner];
    return (ring_block){gc_ring_front(loss->reps_in[slot], n, loss->dim), gc_ring_front(loss->vectors_in[slot], k, n),
                        loss->gist ? gc_ring_front(loss->guide_in[slot], n, loss->guide_dim) : NULL};
}

static void block_release(ring_block *b) {
    GC_RELEASE_ALL(b->reps, b->vectors, b->guide);
    *b = (ring_block){0};
}

/* Folds (forward) or differentiates this rank's queries against the block of rank `owner`
 * (columns `cols`); the guided loss has three blocks of logits in it. */
static void visit(ring_loss *loss, const gc_loss_side *cols, const ring_block *b, int owner, bool differentiate) {
    if (loss->gist) gc_ring_gist_visit(loss, cols, b->guide, owner, differentiate);
    else if (differentiate) gc_loss_tiles_differentiate(&loss->tiles, &loss->queries, cols, loss->passage_start[owner]);
    else gc_loss_tiles_fold(&loss->tiles, &loss->queries, cols, loss->passage_start[owner]);
}

/* The tiles' view of block b as columns: its rows and scale, the running column sums
 * `stats` [2, n] (symmetric forward), its weights and lse' (symmetric backward), and the
 * gradient `grad` [n, D] its tiles add into (backward). */
static gc_loss_side column_side(const ring_block *b, const gc_tensor *stats, gc_tensor *grad, bool symmetric) {
    gc_loss_side side = {.reps = gc_tensor_retain(b->reps), .scale = gc_ring_row(b->vectors, RING_SCALE)};
    if (stats) {
        side.max = gc_ring_row(stats, 0);
        side.sum = gc_ring_row(stats, 1);
    }
    if (grad) side.grad = gc_tensor_retain(grad);
    if (grad && symmetric) {
        side.col_weight = gc_ring_row(b->vectors, RING_WEIGHT);
        side.lse = gc_ring_row(b->vectors, RING_LSE);
    }
    return side;
}

/* Step t's transfer, but at the last step: the held block `b` starts going on to the next
 * rank while the previous rank's (with k vectors) arrives into slot t % 2 of the arrival
 * buffers; returns where it arrives (nothing at the last step). works[0, 1] and, with a
 * guide, works[3] are the transfers'. */
static ring_block start_moving(const ring_loss *loss, int t, int k, const ring_block *b, gc_dist_work **works) {
    if (t == loss->world - 1) return (ring_block){0};
    ring_block into = arrival(loss, t % 2, block_at(loss, t + 1), k);
    works[0] = gc_dist_shift_start(loss->group, b->reps, into.reps);
    works[1] = gc_dist_shift_start(loss->group, b->vectors, into.vectors);
    if (b->guide) works[3] = gc_dist_shift_start(loss->group, b->guide, into.guide);
    return into;
}

/* Waits for every work of works[n] (NULL: none); the first failure's status and message. */
static gc_status wait_all(gc_dist_work **works, int n) {
    gc_status first = GC_OK;
    char message[512] = "";
    for (int i = 0; i < n; i++) {
        if (!works[i]) continue;
        gc_status status = gc_dist_work_wait(works[i]);
        works[i] = NULL;
        if (status != GC_OK && first == GC_OK) {
            first = status;
            snprintf(message, sizeof message, "%s", gc_last_error());
        }
    }
    if (first != GC_OK) gc_set_error(first, "%s", message);
    return first;
}

/* An empty running log-sum-exp in stats [2, n]: max -inf, sum 0. */
static void start_column_sums(gc_tensor *stats) {
    gc_tensor *max = gc_ring_row(stats, 0), *sum = gc_ring_row(stats, 1);
    gc_fill_(max, -INFINITY);
    gc_fill_(sum, 0);
    GC_RELEASE_ALL(max, sum);
}

/* lse' of this rank's passages from their complete column sums, into its block's vectors. */
static gc_status complete_columns(ring_loss *loss, const gc_tensor *stats) {
    gc_loss_side sums = {.max = gc_ring_row(stats, 0), .sum = gc_ring_row(stats, 1)};
    gc_tensor *lse = gc_loss_side_lse(&sums);
    gc_status status = lse ? gc_copy_(loss->passages.lse, lse) : gc_last_status();
    GC_RELEASE_ALL(sums.max, sums.sum, lse);
    return status;
}

gc_status gc_ring_forward(ring_loss *loss) {
    bool symmetric = loss->tiles.symmetric;
    ring_block current = own_block(loss, 1); /* the forward needs only the scale */
    gc_tensor *stats = NULL;
    if (symmetric) {
        stats = gc_ring_front(loss->stats[0], 2, loss->block_rows[loss->rank]);
        start_column_sums(stats);
    }
    gc_status status = GC_OK;
    for (int t = 0; t < loss->world && status == GC_OK; t++) {
        int owner = block_at(loss, t), next = block_at(loss, t + 1);
        gc_dist_work *works[4] = {NULL, NULL, NULL, NULL};
        ring_block arriving = start_moving(loss, t, 1, &current, works);
        gc_loss_side cols = column_side(&current, stats, NULL, symmetric);
        visit(loss, &cols, &current, owner, false);
        gc_loss_side_release(&cols);
        gc_tensor *stats_next = NULL;
        if (symmetric) { /* at the last step, this rank's own column sums arrive, complete */
            stats_next = gc_ring_front(loss->stats[(t + 1) % 2], 2, loss->block_rows[next]);
            works[2] = gc_dist_shift_start(loss->group, stats, stats_next);
        }
        status = wait_all(works, 4);
        block_release(&current);
        current = arriving;
        gc_tensor_release(stats);
        stats = stats_next;
    }
    if (status == GC_OK && symmetric) status = complete_columns(loss, stats);
    block_release(&current);
    gc_tensor_release(stats);
    return status;
}

gc_status gc_ring_value(ring_loss *loss, double *value) {
    gc_loss_side *q = &loss->queries, *p = &loss->passages;
    q->lse = gc_loss_side_lse(q);
    gc_tensor *terms = gc_sub(q->lse, q->target_score);
    gc_tensor *total = gc_sum_all(terms); /* sum_i (lse_i - s_i,t_i) over this rank's queries */
    gc_tensor *weighted = NULL, *columns = NULL, *positives = NULL, *with_columns = NULL, *both = NULL;
    if (loss->tiles.symmetric) {
        /* the passage -> query terms sum_i (lse'_t_i - s_i,t_i), regrouped by passage: its
         * owner adds n_j lse'_j, the queries' owner subtracts s_i,t_i */
        weighted = gc_mul(loss->own_counts, p->lse);
        columns = gc_sum_all(weighted);
        positives = gc_sum_all(q->target_score);
        with_columns = gc_add(total, columns);
        both = gc_sub(with_columns, positives);
    } else {
        both = gc_tensor_retain(total);
    }
    gc_tensor *global = gc_cast(both, GC_F64); /* summed over the ranks in f64 */
    gc_status status = global ? gc_dist_all_reduce(loss->group, global, GC_DIST_SUM) : gc_last_status();
    if (status == GC_OK) *value = loss->tiles.weight * gc_item(global);
    GC_RELEASE_ALL(terms, total, weighted, columns, positives, with_columns, both, global);
    return status;
}

gc_status gc_ring_backward(ring_loss *loss) {
    int k = loss->n_vectors, slot = 0;
    ring_block current = own_block(loss, k);
    /* the gradient of the block held, as the ranks before this one summed it (this rank's own
     * block starts it at zero) */
    gc_tensor *grad = gc_ring_front(loss->grads[0], loss->block_rows[loss->rank], loss->dim);
    gc_fill_(grad, 0);
    gc_status status = GC_OK;
    for (int t = 0; t < loss->world && status == GC_OK; t++) {
        int owner = block_at(loss, t), next = block_at(loss, t + 1);
        gc_dist_work *works[4] = {NULL, NULL, NULL, NULL};
        ring_block arriving = start_moving(loss, t, k, &current, works);
        gc_loss_side cols = column_side(&current, NULL, grad, loss->tiles.symmetric);
        visit(loss, &cols, &current, owner, true);
        gc_loss_side_release(&cols);
        /* the block's gradient goes on after it; at the last step that is rank r + 1's, complete,
         * and this rank's own arrives, complete */
        slot = 1 - slot;
        gc_tensor *arriving_grad = gc_ring_front(loss->grads[slot], loss->block_rows[next], loss->dim);
        works[2] = gc_dist_shift_start(loss->group, grad, arriving_grad);
        status = wait_all(works, 4);
        gc_tensor_release(grad);
        grad = arriving_grad;
        block_release(&current);
        current = arriving;
    }
    block_release(&current);
    if (status == GC_OK) loss->passages.grad = grad;
    else gc_tensor_release(grad);
    return status;
}
