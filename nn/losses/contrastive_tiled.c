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

#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_internal.h"

/* One side of the score matrix: the queries (its rows) or the passages (its columns). A
 * block of rows of a side is a `side` of views (block_of). */
typedef struct side {
    gc_tensor *reps;         /* [N, D] in working precision (f32 for f16/bf16 inputs) */
    gc_tensor *inv_norm;     /* [N] cosine: r; NULL for dot */
    gc_tensor *scale;        /* [N]: a (queries) or b (passages) */
    gc_tensor *max, *sum;    /* [N]: running log-sum-exp of the side's scores (passages: symmetric only) */
    gc_tensor *lse;          /* [N]: max + log(sum) */
    gc_tensor *grad;         /* [N, D]: d loss / d reps */
    gc_tensor *targets;      /* queries: i32 [N], each one's positive passage */
    gc_tensor *target_score; /* queries: [N], s_i,t_i */
    gc_tensor *col_weight;   /* passages (symmetric): [N], w n_j */
} side;

typedef struct tiled_loss {
    const gc_contrastive_options *options;
    side queries, passages;
    gc_tensor *tile_buffer; /* [rows * cols] of one tile's scores, the largest tile */
    int64_t tile;
    double weight;          /* w: the weight of one query's term in one direction */
    double seed;            /* what the gradients are multiplied by: 1 or a loss scale */
    bool symmetric;
} tiled_loss;

static gc_tensor *slice(const gc_tensor *t, int64_t start, int64_t end) {
    return t ? gc_slice0(t, start, end) : NULL;
}

/* Rows [start, end) of every tensor of s, as views. */
static side block_of(const side *s, int64_t start, int64_t end) {
    return (side){slice(s->reps, start, end),   slice(s->inv_norm, start, end), slice(s->scale, start, end),
                  slice(s->max, start, end),    slice(s->sum, start, end),      slice(s->lse, start, end),
                  slice(s->grad, start, end),   slice(s->targets, start, end),  slice(s->target_score, start, end),
                  slice(s->col_weight, start, end)};
}

static void side_release(side *s) {
    gc_tensor *fields[] = {s->reps, s->inv_norm, s->scale, s->max, s->sum, s->lse, s->grad,
                           s->targets, s->target_score, s->col_weight};
    for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) gc_tensor_release(fields[f]);
    *s = (side){0};
}

static int64_t rows_of(const side *s) { return s->reps->shape[0]; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The tile's scores [rows, cols]: a view of the front of the tile buffer. */
static gc_tensor *tile_scores(const tiled_loss *loss, int64_t rows, int64_t cols) {
    gc_tensor *flat = gc_slice0(loss->tile_buffer, 0, rows * cols);
    gc_tensor *scores = gc_reshape(flat, GC_SHAPE(rows, cols));
    gc_tensor_release(flat);
    return scores;
}

/* --- preparation --- */

/* r = 1 / sqrt(||x||^2 + eps^2) per row of x [N, D], `chunk` rows at a time (the squares are
 * a temporary of the chunk's size). NULL on an allocation error. */
static gc_tensor *inverse_norms(const gc_tensor *x, int64_t chunk) {
    int64_t rows = x->shape[0];
    gc_tensor *result = gc_empty(GC_SHAPE(rows), x->dtype, x->device);
    gc_status status = result ? GC_OK : gc_last_status();
    for (int64_t start = 0; start < rows && status == GC_OK; start += chunk) {
        int64_t end = min64(start + chunk, rows);
        gc_tensor *part = gc_slice0(x, start, end), *destination = gc_slice0(result, start, end);
        gc_tensor *squares = gc_mul(part, part);
        gc_tensor *norms_sq = gc_sum_last(squares, false);
        gc_tensor *padded = gc_add_scalar(norms_sq, GC_COSINE_EPS * GC_COSINE_EPS);
        gc_tensor *inverse = gc_rsqrt(padded);
        status = inverse ? gc_copy_(destination, inverse) : gc_last_status();
        GC_RELEASE_ALL(part, destination, squares, norms_sq, padded, inverse);
    }
    if (status == GC_OK) return result;
    gc_tensor_release(result);
    return NULL;
}

/* A side's representations in working precision, its scales (factor: 1 / T for the queries,
 * 1 for the passages) and its zeroed gradient. */
static gc_status prepare_side(side *s, const gc_tensor *x, gc_similarity similarity, double factor, int64_t chunk) {
    s->reps = gc_to_working(x); /* f32 for f16 and bf16: a sum of squares overflows f16 */
    if (!s->reps) return gc_last_status();
    if (similarity == GC_SIMILARITY_COSINE) {
        s->inv_norm = inverse_norms(s->reps, chunk);
        s->scale = gc_mul_scalar(s->inv_norm, factor);
    } else {
        s->scale = gc_full(GC_SHAPE(rows_of(s)), s->reps->dtype, s->reps->device, factor);
    }
    s->grad = gc_zeros_like(s->reps);
    return s->scale && s->grad ? GC_OK : gc_last_status();
}

/* An empty running log-sum-exp for each row of s: max -inf, sum 0. */
static gc_status start_log_sum_exp(side *s) {
    s->max = gc_full(GC_SHAPE(rows_of(s)), s->reps->dtype, s->reps->device, -INFINITY);
    s->sum = gc_zeros(GC_SHAPE(rows_of(s)), s->reps->dtype, s->reps->device);
    return s->max && s->sum ? GC_OK : gc_last_status();
}

/* col_weight [Np] = w n_j: n_j counted by scattering a one per query onto its positive. */
static gc_tensor *column_weights(const tiled_loss *loss) {
    const side *q = &loss->queries;
    int64_t n_passages = rows_of(&loss->passages);
    gc_tensor *ones = gc_ones(GC_SHAPE(rows_of(q), 1), q->reps->dtype, q->reps->device);
    gc_tensor *counts = gc_embedding_backward(ones, q->targets, n_passages); /* [Np, 1] */
    gc_tensor *flat = gc_reshape(counts, GC_SHAPE(n_passages));
    gc_tensor *weights = gc_mul_scalar(flat, loss->weight);
    GC_RELEASE_ALL(ones, counts, flat);
    return weights;
}

static gc_status prepare(tiled_loss *loss, const gc_tensor *queries, const gc_tensor *passages) {
    const gc_contrastive_options *o = loss->options;
    side *q = &loss->queries, *p = &loss->passages;
    gc_status status = prepare_side(q, queries, o->similarity, 1.0 / o->temperature, loss->tile);
    if (status == GC_OK) status = prepare_side(p, passages, o->similarity, 1.0, loss->tile);
    if (status == GC_OK) status = start_log_sum_exp(q);
    if (status == GC_OK && loss->symmetric) status = start_log_sum_exp(p);
    if (status != GC_OK) return status;
    q->targets = gc_contrastive_targets(queries, passages, o);
    q->target_score = gc_empty(GC_SHAPE(rows_of(q)), q->reps->dtype, q->reps->device);
    if (loss->symmetric && q->targets) p->col_weight = column_weights(loss);
    int64_t largest = min64(loss->tile, rows_of(q)) * min64(loss->tile, rows_of(p));
    loss->tile_buffer = gc_empty(GC_SHAPE(largest), q->reps->dtype, q->reps->device);
    bool ok = q->targets && q->target_score && (!loss->symmetric || p->col_weight) && loss->tile_buffer;
    return ok ? GC_OK : gc_last_status();
}

/* --- the two passes over the tiles --- */

/* Calls visit for every tile, in order: query block `rows` x passage block `cols` (views)
 * and the tile whose scores hold their dot products. Allocates nothing but views. */
typedef void (*tile_visitor)(const tiled_loss *loss, const side *rows, const side *cols, gc_score_tile *tile);

static void for_each_tile(const tiled_loss *loss, tile_visitor visit) {
    const side *q = &loss->queries, *p = &loss->passages;
    for (int64_t i0 = 0; i0 < rows_of(q); i0 += loss->tile) {
        side rows = block_of(q, i0, min64(i0 + loss->tile, rows_of(q)));
        for (int64_t j0 = 0; j0 < rows_of(p); j0 += loss->tile) {
            side cols = block_of(p, j0, min64(j0 + loss->tile, rows_of(p)));
            gc_tensor *scores = tile_scores(loss, rows_of(&rows), rows_of(&cols));
            gc_matmul_into(scores, rows.reps, cols.reps, false, true, false);
            gc_score_tile tile = {scores, rows.scale, cols.scale, rows.targets, j0};
            visit(loss, &rows, &cols, &tile);
            gc_tensor_release(scores);
            side_release(&cols);
        }
        side_release(&rows);
    }
}

/* Forward: the tile folded into the running log-sum-exp of each query row (and passage
 * column), and the positives' scores picked up. */
static void fold_tile(const tiled_loss *loss, const side *rows, const side *cols, gc_score_tile *tile) {
    (void)loss;
    gc_score_tile_lse(tile, rows->max, rows->sum, cols->max, cols->sum, rows->target_score);
}

/* lse = max + log(sum) for each row of s. */
static gc_tensor *log_sum_exp(const side *s) {
    gc_tensor *log_sum = gc_log(s->sum);
    gc_tensor *lse = gc_add(s->max, log_sum);
    gc_tensor_release(log_sum);
    return lse;
}

/* sum_i (lse'_t_i - s_i,t_i): the passage -> query terms, each passage's column lse
 * gathered at the queries' positives. */
static gc_tensor *passage_terms_total(const tiled_loss *loss) {
    const side *q = &loss->queries, *p = &loss->passages;
    gc_tensor *column = gc_reshape(p->lse, GC_SHAPE(rows_of(p), 1));
    gc_tensor *picked = gc_embedding(column, q->targets); /* [Nq, 1] */
    gc_tensor *flat = gc_reshape(picked, GC_SHAPE(rows_of(q)));
    gc_tensor *terms = gc_sub(flat, q->target_score);
    gc_tensor *total = gc_sum_all(terms);
    GC_RELEASE_ALL(column, picked, flat, terms);
    return total;
}

/* The loss from the log-sum-exps (which it completes) and the positives' scores. */
static gc_status loss_value(tiled_loss *loss, double *value) {
    side *q = &loss->queries, *p = &loss->passages;
    q->lse = log_sum_exp(q);
    if (loss->symmetric) p->lse = log_sum_exp(p);
    gc_tensor *terms = gc_sub(q->lse, q->target_score);
    gc_tensor *total = gc_sum_all(terms);
    gc_tensor *passage_total = loss->symmetric && p->lse ? passage_terms_total(loss) : NULL;
    /* both directions summed on the device: one read of it per loss */
    gc_tensor *both = passage_total ? gc_add(total, passage_total) : gc_tensor_retain(total);
    gc_status status = both && (!loss->symmetric || passage_total) ? GC_OK : gc_last_status();
    if (status == GC_OK) *value = loss->weight * gc_item(both);
    GC_RELEASE_ALL(terms, total, passage_total, both);
    return status;
}

/* Backward: d loss / d dot products in the scores' place, and the two matmuls that add them
 * into the gradients. */
static void differentiate_tile(const tiled_loss *loss, const side *rows, const side *cols, gc_score_tile *tile) {
    double target_weight = loss->symmetric ? 2 * loss->weight : loss->weight;
    gc_score_tile_grad(tile, rows->lse, loss->weight, cols->lse, cols->col_weight, target_weight);
    gc_matmul_into(rows->grad, tile->scores, cols->reps, false, false, true); /* [rows, D] += h p */
    gc_matmul_into(cols->grad, tile->scores, rows->reps, true, false, true);  /* [cols, D] += h^T q */
}

/* Cosine: grad -= (grad . x) r^2 x for each row (see the top of this file), `chunk` rows at
 * a time. Nothing for dot. */
static gc_status normalisation_backward(side *s, int64_t chunk) {
    gc_status status = GC_OK;
    for (int64_t start = 0; s->inv_norm && start < rows_of(s) && status == GC_OK; start += chunk) {
        int64_t end = min64(start + chunk, rows_of(s));
        side b = block_of(s, start, end);
        gc_tensor *products = gc_mul(b.grad, b.reps);
        gc_tensor *dots = gc_sum_last(products, true); /* [rows, 1] */
        gc_tensor *r = gc_reshape(b.inv_norm, GC_SHAPE(end - start, 1));
        gc_tensor *r_squared = gc_mul(r, r);
        gc_tensor *coefficients = gc_mul(dots, r_squared);
        gc_tensor *radial = gc_mul(b.reps, coefficients); /* [rows, D] */
        if (radial) {
            gc_scale_inplace(radial, -1.0);
            status = gc_add_inplace(b.grad, radial);
        } else {
            status = gc_last_status();
        }
        GC_RELEASE_ALL(products, dots, r, r_squared, coefficients, radial);
        side_release(&b);
    }
    return status;
}

/* seed times the gradient (in its working precision: a loss scale must multiply it before it
 * is rounded to 16 bits), in the input's dtype (a new reference). */
static gc_tensor *seeded_in_dtype(gc_tensor *grad, double seed, gc_dtype dtype) {
    if (seed != 1) gc_scale_inplace(grad, seed);
    return grad->dtype == dtype ? gc_tensor_retain(grad) : gc_cast(grad, dtype);
}

/* Everything after the checks, under no-grad. */
static gc_status run(tiled_loss *loss, const gc_tensor *queries, const gc_tensor *passages, double *value,
                     gc_tensor **grads) {
    gc_status status = prepare(loss, queries, passages);
    if (status != GC_OK) return status;
    for_each_tile(loss, fold_tile);
    status = loss_value(loss, value);
    if (status == GC_OK && rows_of(&loss->queries) > 0 && !isfinite(*value))
        status = gc_contrastive_explain_non_finite(queries, passages, loss->options, *value, loss->tile);
    if (status != GC_OK) return status;
    for_each_tile(loss, differentiate_tile);
    status = normalisation_backward(&loss->queries, loss->tile);
    if (status == GC_OK) status = normalisation_backward(&loss->passages, loss->tile);
    if (status != GC_OK) return status;
    grads[0] = seeded_in_dtype(loss->queries.grad, loss->seed, queries->dtype);
    grads[1] = seeded_in_dtype(loss->passages.grad, loss->seed, passages->dtype);
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
    int64_t n_queries = queries->shape[0];
    int64_t tile = gc_contrastive_tile_size(options, queries->device, gc_contrastive_rows(queries, passages));
    /* w: the mean of no queries is nan, as in the untiled loss */
    double mean = n_queries ? 1.0 / (double)n_queries : NAN;
    tiled_loss loss = {.options = options,
                       .tile = tile,
                       .weight = (options->reduction == GC_LOSS_MEAN ? mean : 1.0) * (options->symmetric ? 0.5 : 1.0),
                       .symmetric = options->symmetric,
                       .seed = seed};
    gc_tensor *grads[2] = {NULL, NULL};
    bool previous = gc_set_grad_enabled(false);
    gc_status status = run(&loss, queries, passages, value, grads);
    gc_set_grad_enabled(previous);
    side_release(&loss.queries);
    side_release(&loss.passages);
    gc_tensor_release(loss.tile_buffer);
    if (status != GC_OK) {
        GC_RELEASE_ALL(grads[0], grads[1]);
        return status;
    }
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}
