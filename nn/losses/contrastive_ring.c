/* The ring contrastive loss (gc_contrastive_loss_ring): the entry point and the set-up --
 * what the ranks tell each other before anything travels, this rank's sides, the targets
 * and column counts in global indices, and the buffers the blocks arrive in. The passes are
 * contrastive_ring_passes.c's; docs/DESIGN.md ("The ring loss") has the algorithm. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "contrastive_ring.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"
#include "tensor/op_util.h"

#define OP "contrastive_loss_ring"

gc_tensor *gc_ring_front(const gc_tensor *flat, int64_t rows, int64_t cols) {
    gc_tensor *front = gc_slice0(flat, 0, rows * cols);
    gc_tensor *shaped = gc_reshape(front, GC_SHAPE(rows, cols));
    gc_tensor_release(front);
    return shaped;
}

gc_tensor *gc_ring_row(const gc_tensor *t, int64_t i) {
    gc_tensor *row = gc_slice0(t, i, i + 1);
    gc_tensor *vector = gc_reshape(row, GC_SHAPE(t->shape[1]));
    gc_tensor_release(row);
    return vector;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* --- what the ranks tell each other first --- */

/* A rank's rows, and what must be the same on every rank (all int64 and double: no padding
 * bytes travel). */
typedef struct rank_shape {
    int64_t queries, passages, dim;
    int64_t dtype, similarity, reduction, symmetric, targets_given;
    int64_t guide_dim; /* GIST: the guide's Dg; 0 without a guide */
    int64_t positives; /* the passes of the several-positive loss (ring_target) */
    double temperature;
} rank_shape;

static rank_shape shape_of(const ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages) {
    const gc_contrastive_options *o = loss->options;
    return (rank_shape){queries->shape[0], passages->shape[0], queries->shape[1], queries->dtype, o->similarity,
                        o->reduction, o->symmetric, o->targets != NULL, loss->guide_dim, loss->target.positives, o->temperature};
}

/* What a rank sent, as text; a peer's values are outside input (its dtype may be no dtype). */
static const char *describe(const rank_shape *s, char *text, size_t size) {
    char dtype[48];
    snprintf(text, size, "D %lld, %s, %s, temperature %g, %s, %s, %s, guide Dg %lld, %lld positives", (long long)s->dim,
             gc_dtype_describe((double)s->dtype, dtype, sizeof dtype),
             s->similarity == GC_SIMILARITY_COSINE ? "cosine" : "dot", s->temperature,
             s->reduction == GC_LOSS_MEAN ? "mean" : "sum", s->symmetric ? "symmetric" : "one-sided",
             s->targets_given ? "targets given" : "default targets", (long long)s->guide_dim, (long long)s->positives);
    return text;
}

/* A rank that calls with other options would send blocks of other sizes, or expect other
 * vectors: the ranks must agree, or nothing they compute means anything. Every rank sees the
 * same table, so every rank returns the same error. */
static gc_status check_agreement(int rank, const rank_shape *mine, int other, const rank_shape *theirs) {
    bool same = mine->dim == theirs->dim && mine->dtype == theirs->dtype && mine->similarity == theirs->similarity &&
                mine->reduction == theirs->reduction && mine->symmetric == theirs->symmetric &&
                mine->targets_given == theirs->targets_given && mine->temperature == theirs->temperature &&
                mine->guide_dim == theirs->guide_dim && mine->positives == theirs->positives;
    if (same) return GC_OK;
    char a[192], b[192];
    gc_set_error(GC_ERR_FORMAT, OP ": rank %d calls with %s, rank %d with %s (every rank must give the same)", rank,
                 describe(mine, a, sizeof a), other, describe(theirs, b, sizeof b));
    return GC_ERR_FORMAT;
}

/* A rank's row counts, checked before any sum or buffer is made of them: the targets index
 * the global batch's passages in i32, so every count and total fits one. */
static gc_status check_rows(int rank, const rank_shape *theirs, int64_t total_queries, int64_t total_passages) {
    bool fits = theirs->queries >= 0 && theirs->passages >= 0 && theirs->queries <= INT32_MAX - total_queries &&
                theirs->passages <= INT32_MAX - total_passages;
    if (fits) return GC_OK;
    gc_set_error(GC_ERR_FORMAT,
                 OP ": rank %d has %lld queries and %lld passages (the global batch has at most %d of each, "
                 "after %lld and %lld of the ranks before)",
                 rank, (long long)theirs->queries, (long long)theirs->passages, INT32_MAX, (long long)total_queries,
                 (long long)total_passages);
    return GC_ERR_FORMAT;
}

/* Every rank's rows (the layout of the global batch) and the checks of agreement. */
static gc_status exchange_shapes(ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages) {
    rank_shape mine = shape_of(loss, queries, passages);
    rank_shape *all = malloc((size_t)loss->world * sizeof *all);
    if (!all) gc_fatal(OP ": out of host memory for %d ranks", loss->world);
    gc_status status = gc_dist_all_gather_host(loss->group, &mine, sizeof mine, all);
    for (int r = 0; r < loss->world && status == GC_OK; r++) {
        status = check_agreement(loss->rank, &mine, r, &all[r]);
        if (status == GC_OK) status = check_rows(r, &all[r], loss->total_queries, loss->total_passages);
        if (status != GC_OK) break;
        if (r < loss->rank) loss->query_start += all[r].queries;
        loss->query_starts[r] = loss->total_queries;
        loss->passage_start[r] = loss->total_passages;
        loss->passage_count[r] = all[r].passages;
        loss->block_rows[r] = all[r].passages + (loss->gist ? 2 * all[r].queries : 0);
        loss->total_queries += all[r].queries;
        loss->total_passages += all[r].passages;
        loss->largest_block = max64(loss->largest_block, loss->block_rows[r]);
    }
    free(all);
    return status;
}

/* The largest of the given targets, read on the host, against the ranks' passages together:
 * that bound comes from what the peers said, so a target past it is their disagreement (or a
 * peer's lie), which every rank returns alike, not the caller's mistake. */
static gc_status check_target_bound(const ring_loss *loss, const gc_tensor *given) {
    int64_t n = gc_numel(given);
    double *host = malloc((size_t)(n ? n : 1) * sizeof *host), largest = -1;
    if (!host) gc_fatal(OP ": out of host memory for %lld targets", (long long)n);
    gc_to_host_f64(given, host);
    for (int64_t i = 0; i < n; i++)
        if (host[i] > largest) largest = host[i];
    free(host);
    if (largest < (double)loss->total_passages) return GC_OK;
    gc_set_error(GC_ERR_FORMAT,
                 OP ": a target is passage %.0f, but the ranks' passages together are %lld (the ranks disagree on "
                 "their passages, or a peer sent a wrong count)",
                 largest, (long long)loss->total_passages);
    return GC_ERR_FORMAT;
}

/* The targets must index the global passages (checked on the device, like the tiled loss's,
 * after the bound the ranks' counts set, on the host), or the default must be defined. The
 * global counts are the ranks' together: a count that does not fit is the ranks'
 * disagreement, an error every rank returns alike. */
static gc_status check_targets(const ring_loss *loss, const gc_tensor *queries) {
    const gc_tensor *given = loss->options->targets;
    if (given && given->ndim == 1 && given->shape[0] != loss->total_queries) {
        gc_set_error(GC_ERR_FORMAT, OP ": the targets have %lld entries, the ranks' queries are %lld",
                     (long long)given->shape[0], (long long)loss->total_queries);
        return GC_ERR_FORMAT;
    }
    if (given) {
        gc_contrastive_check_targets(OP, queries, loss->total_queries, given);
        if (loss->world > 1 && check_target_bound(loss, given) != GC_OK) return GC_ERR_FORMAT;
        gc_check_index_range(OP, "target", given, loss->total_passages);
    } else if (loss->total_queries > 0 && (loss->total_passages % loss->total_queries != 0 ||
                                           loss->total_passages / loss->total_queries < loss->target.positives)) {
        gc_set_error(GC_ERR_FORMAT,
                     OP ": the ranks' %lld passages together are not a multiple of their %lld queries with %lld "
                     "positives each (give targets)",
                     (long long)loss->total_passages, (long long)loss->total_queries,
                     (long long)loss->target.positives);
        return GC_ERR_FORMAT;
    }
    return GC_OK;
}

/* --- this rank's sides --- */

/* Global query i's positive under the default targets: global passage i (Np / Nq) + column. */
static int64_t default_step(const ring_loss *loss) {
    return loss->total_queries ? loss->total_passages / loss->total_queries : 1;
}

/* This rank's queries' positives, as global passage indices (i32 [nq]). */
static gc_tensor *local_targets(const ring_loss *loss, int64_t n_queries, gc_device device) {
    const gc_tensor *given = loss->options->targets;
    if (given) return gc_slice0(given, loss->query_start, loss->query_start + n_queries);
    int64_t step = default_step(loss);
    return gc_arange(n_queries, (double)(loss->query_start * step + loss->target.column), (double)step, GC_I32,
                     device);
}

/* n_j [np]: how many global queries have this rank's passage j as their positive, counted by
 * scattering a one per query onto its positive. Given targets are the whole batch's, so all
 * of them are scattered (O(B) numbers, once); the default positives in this rank's range are
 * those of consecutive queries, so only those are. */
static gc_tensor *own_counts(const ring_loss *loss, gc_dtype dtype, gc_device device) {
    int64_t n = loss->passage_count[loss->rank], first = loss->passage_start[loss->rank];
    gc_tensor *ids;
    int64_t vocab = loss->total_passages, offset = first;
    if (loss->options->targets) {
        ids = gc_tensor_retain((gc_tensor *)loss->options->targets);
    } else {
        /* query q's positive is q step + column (column < step): those in [first, first + n) */
        int64_t step = default_step(loss), column = loss->target.column;
        int64_t first_query = (first - column + step - 1) / step;
        int64_t end_query = min64((first + n - column + step - 1) / step, loss->total_queries);
        ids = gc_arange(max64(end_query - first_query, 0), (double)(first_query * step + column - first), (double)step,
                        GC_I32, device);
        vocab = n;
        offset = 0;
    }
    gc_tensor *ones = ids ? gc_ones(GC_SHAPE(ids->shape[0], 1), dtype, device) : NULL;
    gc_tensor *table = gc_embedding_backward(ones, ids, vocab); /* [vocab, 1] */
    gc_tensor *mine = table ? gc_slice0(table, offset, offset + n) : NULL;
    gc_tensor *counts = mine ? gc_reshape(mine, GC_SHAPE(n)) : NULL;
    GC_RELEASE_ALL(ids, ones, table, mine);
    return counts;
}

/* Copies `from` [n] (scaled by factor) into row i of t [k, n]. */
static gc_status set_row(gc_tensor *t, int64_t i, const gc_tensor *from, double factor) {
    gc_tensor *row = gc_ring_row(t, i);
    gc_tensor *scaled = factor == 1 ? gc_tensor_retain((gc_tensor *)from) : gc_mul_scalar(from, factor);
    gc_status status = scaled ? gc_copy_(row, scaled) : gc_last_status();
    GC_RELEASE_ALL(row, scaled);
    return status;
}

/* This rank's block as it leaves: the scale, and (symmetric) w n_j; lse' comes after the
 * forward. */
static gc_status own_block(ring_loss *loss) {
    gc_loss_side *p = &loss->passages;
    int64_t n = gc_loss_side_count(p);
    loss->own_vectors = gc_empty(GC_SHAPE(loss->n_vectors, n), p->reps->dtype, p->reps->device);
    gc_status status = loss->own_vectors ? set_row(loss->own_vectors, RING_SCALE, p->scale, 1) : gc_last_status();
    if (status != GC_OK || !loss->tiles.symmetric) return status;
    loss->own_counts = own_counts(loss, p->reps->dtype, p->reps->device);
    status = loss->own_counts ? set_row(loss->own_vectors, RING_WEIGHT, loss->own_counts, loss->tiles.weight)
                              : gc_last_status();
    p->col_weight = gc_ring_row(loss->own_vectors, RING_WEIGHT);
    p->lse = gc_ring_row(loss->own_vectors, RING_LSE);
    return status;
}

/* The buffers blocks arrive in, each sized for the largest block. */
static gc_status make_buffers(ring_loss *loss, gc_dtype dtype, gc_device device) {
    int64_t largest = loss->largest_block, block = largest * loss->dim;
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        if (loss->world > 1) { /* a world of one has no block to receive */
            loss->reps_in[i] = gc_empty(GC_SHAPE(block), dtype, device);
            loss->vectors_in[i] = gc_empty(GC_SHAPE(loss->n_vectors * largest), dtype, device);
            ok = ok && loss->reps_in[i] && loss->vectors_in[i];
        }
        if (loss->world > 1 && loss->gist) { /* in the guide's dtype */
            loss->guide_in[i] = gc_empty(GC_SHAPE(largest * loss->guide_dim), gc_ring_gist_own_guide(loss)->dtype,
                                         device);
            ok = ok && loss->guide_in[i];
        }
        if (loss->tiles.symmetric) {
            loss->stats[i] = gc_empty(GC_SHAPE(2 * largest), dtype, device);
            ok = ok && loss->stats[i];
        }
    }
    for (int i = 0; i < 2; i++) {
        loss->grads[i] = gc_empty(GC_SHAPE(block), dtype, device);
        ok = ok && loss->grads[i];
    }
    return ok ? GC_OK : gc_last_status();
}

static gc_status prepare(ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages) {
    const gc_contrastive_options *o = loss->options;
    gc_loss_side *q = &loss->queries, *p = &loss->passages;
    int64_t tile = loss->tiles.tile;
    gc_status status = gc_loss_side_prepare(q, queries, o->similarity, 1.0 / o->temperature, tile, true);
    if (status == GC_OK) status = gc_loss_side_start_lse(q);
    if (status != GC_OK) return status;
    q->targets = local_targets(loss, gc_loss_side_count(q), q->reps->device);
    q->target_score = gc_empty(GC_SHAPE(gc_loss_side_count(q)), q->reps->dtype, q->reps->device);
    if (!q->targets || !q->target_score) return gc_last_status();
    /* this rank's block: its passages, or with a guide (which needs the targets) more rows */
    gc_tensor *block = NULL;
    if (loss->gist) status = gc_ring_gist_prepare(loss, queries, passages, &block);
    else block = gc_tensor_retain((gc_tensor *)passages);
    /* the block's gradient arrives at the last step, in a block gradient's buffer */
    if (status == GC_OK) status = gc_loss_side_prepare(p, block, o->similarity, 1.0, tile, false);
    gc_tensor_release(block);
    if (status != GC_OK) return status;
    gc_dtype dtype = q->reps->dtype;
    status = gc_loss_tiles_init(&loss->tiles, tile, gc_loss_side_count(q), loss->largest_block, dtype, q->reps->device);
    if (status == GC_OK) status = own_block(loss);
    return status == GC_OK ? make_buffers(loss, dtype, q->reps->device) : status;
}

/* Every rank learns whether all could prepare before any block moves, so that one rank's
 * failed allocation is an error everywhere at once rather than a stall until the timeout. A
 * peer refused memory is GC_ERR_MEM_LIMIT here too, so that automatic chunk sizing retries on
 * every rank (gradcache/auto_chunk_group.c); any other failure of a peer is GC_ERR_PEER. */
static gc_status agree_prepared(ring_loss *loss, gc_status prepared) {
    char message[512];
    snprintf(message, sizeof message, "%s", prepared == GC_OK ? "" : gc_last_error());
    bool out_of_memory = prepared == GC_ERR_OUT_OF_MEMORY || prepared == GC_ERR_MEM_LIMIT;
    bool failed = prepared != GC_OK, failed_otherwise = failed && !out_of_memory;
    gc_status agreed = gc_dist_any(loss->group, &failed);
    if (agreed == GC_OK && failed) agreed = gc_dist_any(loss->group, &failed_otherwise);
    if (prepared != GC_OK) {
        gc_set_error(prepared, "%s", message);
        return prepared;
    }
    if (agreed != GC_OK || !failed) return agreed;
    gc_status said = failed_otherwise ? GC_ERR_PEER : GC_ERR_MEM_LIMIT;
    gc_set_error(said, OP ": another rank could not prepare (%s; its own error says more)",
                 failed_otherwise ? "it failed" : "out of memory");
    return said;
}

/* The loss is not finite on every rank alike (it is one all-reduced value): each names its
 * own bad row, or says that its rows are finite. */
static gc_status explain_non_finite(const ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages,
                                    double value) {
    char who[64];
    snprintf(who, sizeof who, OP ": rank %d's", loss->rank);
    gc_status status = gc_contrastive_find_non_finite(who, queries, passages, loss->tiles.tile);
    if (status != GC_OK) return status;
    gc_set_error(GC_ERR_NON_FINITE,
                 OP ": the loss is %g and rank %d's representations are finite: another rank's are not, or the "
                 "scores overflow at temperature %g", value, loss->rank, loss->options->temperature);
    return GC_ERR_NON_FINITE;
}

static void release_buffers(ring_loss *loss) {
    GC_RELEASE_ALL(loss->reps_in[0], loss->reps_in[1], loss->vectors_in[0], loss->vectors_in[1], loss->stats[0],
                   loss->stats[1], loss->grads[0], loss->grads[1], loss->guide_in[0], loss->guide_in[1]);
    loss->reps_in[0] = loss->reps_in[1] = loss->vectors_in[0] = loss->vectors_in[1] = NULL;
    loss->stats[0] = loss->stats[1] = loss->grads[0] = loss->grads[1] = NULL;
    loss->guide_in[0] = loss->guide_in[1] = NULL;
}

/* The guided loss's gradients of this rank's rows, seeded, in the inputs' dtypes. */
static gc_status guided_gradients(ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages,
                                  gc_tensor **grads) {
    gc_tensor *working[2] = {NULL, NULL};
    gc_status status = gc_ring_gist_gradients(loss, &working[0], &working[1]);
    if (status == GC_OK) {
        grads[0] = gc_loss_seeded(working[0], loss->seed, queries->dtype);
        grads[1] = gc_loss_seeded(working[1], loss->seed, passages->dtype);
        status = grads[0] && grads[1] ? GC_OK : gc_last_status();
    }
    GC_RELEASE_ALL(working[0], working[1]);
    return status;
}

/* Everything after the shapes are known, under no-grad. */
static gc_status run(ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages, double *value,
                     gc_tensor **grads) {
    gc_status status = agree_prepared(loss, prepare(loss, queries, passages));
    if (status == GC_OK) status = gc_ring_forward(loss);
    if (status == GC_OK && loss->gist) status = gc_ring_gist_status(loss);
    if (status == GC_OK) status = gc_ring_value(loss, value);
    if (status == GC_OK && loss->total_queries > 0 && !isfinite(*value))
        status = explain_non_finite(loss, queries, passages, *value);
    if (status == GC_OK) status = gc_ring_backward(loss);
    if (status == GC_OK && loss->gist) status = gc_ring_gist_status(loss);
    release_buffers(loss); /* before the last temporaries: they do not add to the peak */
    if (status == GC_OK) status = gc_loss_side_normalisation_backward(&loss->queries, loss->tiles.tile);
    if (status == GC_OK) status = gc_loss_side_normalisation_backward(&loss->passages, loss->tiles.tile);
    if (status == GC_OK && loss->gist) return guided_gradients(loss, queries, passages, grads);
    if (status != GC_OK) return status;
    grads[0] = gc_loss_seeded(loss->queries.grad, loss->seed, queries->dtype);
    grads[1] = gc_loss_seeded(loss->passages.grad, loss->seed, passages->dtype);
    if (grads[1] && gc_loss_side_count(&loss->passages) < loss->largest_block) {
        /* a view of the largest block's buffer: a tensor of its own size instead */
        gc_tensor *own = gc_clone(grads[1]);
        gc_tensor_release(grads[1]);
        grads[1] = own;
    }
    return grads[0] && grads[1] ? GC_OK : gc_last_status();
}

gc_status gc_ring_loss_run(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                           const gc_contrastive_options *options, ring_gist *gist, ring_target target, double seed,
                           double *value, gc_tensor **grad_queries, gc_tensor **grad_passages) {
    int world = gc_dist_world_size(group);
    ring_loss loss = {.group = group, .options = options, .gist = gist, .target = target, .rank = gc_dist_rank(group), .world = world,
                      .dim = queries->shape[1], .seed = seed, .tiles.symmetric = options->symmetric,
                      .n_vectors = options->symmetric ? RING_VECTORS : 1};
    int64_t *per_rank = calloc(4 * (size_t)world, sizeof *per_rank);
    if (!per_rank) gc_fatal(OP ": out of host memory for %d ranks", world);
    loss.passage_count = per_rank;
    loss.passage_start = per_rank + world;
    loss.query_starts = per_rank + 2 * world;
    loss.block_rows = per_rank + 3 * world;
    if (gist) gc_ring_gist_attach(&loss);
    gc_tensor *grads[2] = {NULL, NULL};
    gc_status status = exchange_shapes(&loss, queries, passages);
    if (status == GC_OK) status = check_targets(&loss, queries);
    if (status == GC_OK) {
        loss.tiles.tile = gc_contrastive_tile_size(options, queries->device,
                                                   max64(queries->shape[0], loss.largest_block));
        loss.tiles.weight = gc_contrastive_weight(options, loss.total_queries);
        bool previous = gc_set_grad_enabled(false);
        status = run(&loss, queries, passages, value, grads);
        gc_set_grad_enabled(previous);
    }
    release_buffers(&loss);
    gc_loss_side_release(&loss.queries);
    gc_loss_side_release(&loss.passages);
    GC_RELEASE_ALL(loss.own_vectors, loss.own_counts);
    gc_loss_tiles_release(&loss.tiles);
    free(per_rank);
    if (status != GC_OK) {
        GC_RELEASE_ALL(grads[0], grads[1]);
        return status;
    }
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}

gc_status gc_contrastive_loss_ring(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                   const gc_contrastive_options *options, double seed, double *value,
                                   gc_tensor **grad_queries, gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) {
        if (gc_last_status() == GC_OK) gc_fatal(OP ": queries or passages is NULL");
        return gc_last_status(); /* the error that made an input NULL */
    }
    if (!group) gc_fatal(OP ": no process group");
    gc_contrastive_check_options(queries, passages, options);
    if (gc_contrastive_positive_count(options) > 1)
        return gc_contrastive_multi_group_value_and_grad(group, queries, passages, options, seed, value, grad_queries,
                                                         grad_passages);
    return gc_ring_loss_run(group, queries, passages, options, NULL, (ring_target){0, 1}, seed, value, grad_queries,
                            grad_passages);
}
