/* The tiles of the contrastive loss (contrastive_tiles.h; the formulas are explained at the
 * top of contrastive_tiled.c). */
#include "contrastive_tiles.h"

#include <math.h>

#include "gradcache/ops.h"
#include "tensor/op_internal.h"

static gc_tensor *slice(const gc_tensor *t, int64_t start, int64_t end) {
    return t ? gc_slice0(t, start, end) : NULL;
}

gc_loss_side gc_loss_side_rows(const gc_loss_side *s, int64_t start, int64_t end) {
    return (gc_loss_side){slice(s->reps, start, end),    slice(s->inv_norm, start, end),
                          slice(s->scale, start, end),   slice(s->max, start, end),
                          slice(s->sum, start, end),     slice(s->lse, start, end),
                          slice(s->grad, start, end),    slice(s->targets, start, end),
                          slice(s->target_score, start, end), slice(s->col_weight, start, end)};
}

void gc_loss_side_release(gc_loss_side *s) {
    GC_RELEASE_ALL(s->reps, s->inv_norm, s->scale, s->max, s->sum, s->lse, s->grad, s->targets, s->target_score,
                   s->col_weight);
    *s = (gc_loss_side){0};
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

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

gc_status gc_loss_side_prepare(gc_loss_side *s, const gc_tensor *x, gc_similarity similarity, double factor,
                               int64_t chunk, bool with_grad) {
    s->reps = gc_to_working(x); /* f32 for f16 and bf16: a sum of squares overflows f16 */
    if (!s->reps) return gc_last_status();
    if (similarity == GC_SIMILARITY_COSINE) {
        s->inv_norm = inverse_norms(s->reps, chunk);
        s->scale = gc_mul_scalar(s->inv_norm, factor);
    } else {
        s->scale = gc_full(GC_SHAPE(gc_loss_side_count(s)), s->reps->dtype, s->reps->device, factor);
    }
    if (with_grad) s->grad = gc_zeros_like(s->reps);
    return s->scale && (s->grad || !with_grad) ? GC_OK : gc_last_status();
}

gc_status gc_loss_side_start_lse(gc_loss_side *s) {
    s->max = gc_full(GC_SHAPE(gc_loss_side_count(s)), s->reps->dtype, s->reps->device, -INFINITY);
    s->sum = gc_zeros(GC_SHAPE(gc_loss_side_count(s)), s->reps->dtype, s->reps->device);
    return s->max && s->sum ? GC_OK : gc_last_status();
}

gc_tensor *gc_loss_side_lse(const gc_loss_side *s) {
    gc_tensor *log_sum = gc_log(s->sum);
    gc_tensor *lse = gc_add(s->max, log_sum);
    gc_tensor_release(log_sum);
    return lse;
}

gc_status gc_loss_tiles_init(gc_loss_tiles *tiles, int64_t tile, int64_t rows, int64_t cols, gc_dtype dtype,
                             gc_device device) {
    tiles->tile = tile;
    tiles->buffer = gc_empty(GC_SHAPE(min64(tile, rows) * min64(tile, cols)), dtype, device);
    return tiles->buffer ? GC_OK : gc_last_status();
}

void gc_loss_tiles_release(gc_loss_tiles *tiles) {
    gc_tensor_release(tiles->buffer);
    tiles->buffer = NULL;
}

/* --- the two passes over the tiles --- */

/* The tile's scores [rows, cols]: a view of the front of the tile buffer. */
static gc_tensor *tile_scores(const gc_loss_tiles *tiles, int64_t rows, int64_t cols) {
    gc_tensor *flat = gc_slice0(tiles->buffer, 0, rows * cols);
    gc_tensor *scores = gc_reshape(flat, GC_SHAPE(rows, cols));
    gc_tensor_release(flat);
    return scores;
}

/* Calls visit for every tile of rows x cols, in order: a block of rows against a block of
 * columns (views) and the tile whose scores hold their dot products. Allocates nothing but
 * views, and the mask's bias when there is a mask. */
typedef void (*tile_visitor)(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                             gc_score_tile *tile);

static void for_each_tile(const gc_loss_tiles *tiles, const gc_loss_side *all_rows, const gc_loss_side *all_cols,
                          int64_t col_start, tile_visitor visit) {
    int64_t n_rows = gc_loss_side_count(all_rows), n_cols = gc_loss_side_count(all_cols);
    for (int64_t i0 = 0; i0 < n_rows; i0 += tiles->tile) {
        gc_loss_side rows = gc_loss_side_rows(all_rows, i0, min64(i0 + tiles->tile, n_rows));
        for (int64_t j0 = 0; j0 < n_cols; j0 += tiles->tile) {
            gc_loss_side cols = gc_loss_side_rows(all_cols, j0, min64(j0 + tiles->tile, n_cols));
            gc_tensor *scores = tile_scores(tiles, gc_loss_side_count(&rows), gc_loss_side_count(&cols));
            gc_matmul_into(scores, rows.reps, cols.reps, false, true, false);
            gc_tensor *bias = tiles->mask ? tiles->mask(tiles->mask_user, i0, gc_loss_side_count(&rows), j0,
                                                        gc_loss_side_count(&cols))
                                          : NULL;
            gc_score_tile tile = {scores, rows.scale, cols.scale, rows.targets, col_start + j0, bias};
            visit(tiles, &rows, &cols, &tile);
            GC_RELEASE_ALL(scores, bias);
            gc_loss_side_release(&cols);
        }
        gc_loss_side_release(&rows);
    }
}

/* Forward: the tile folded into the running log-sum-exp of each row (and column), and the
 * positives' scores picked up. */
static void fold_tile(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                      gc_score_tile *tile) {
    (void)tiles;
    gc_score_tile_lse(tile, rows->max, rows->sum, cols->max, cols->sum, rows->target_score);
}

void gc_loss_tiles_fold(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                        int64_t col_start) {
    for_each_tile(tiles, rows, cols, col_start, fold_tile);
}

/* Backward: d loss / d dot products in the scores' place, and the two matmuls that add them
 * into the gradients. */
static void differentiate_tile(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                               gc_score_tile *tile) {
    double target_weight = tiles->symmetric ? 2 * tiles->weight : tiles->weight;
    gc_score_tile_grad(tile, rows->lse, tiles->weight, cols->lse, cols->col_weight, target_weight);
    gc_matmul_into(rows->grad, tile->scores, cols->reps, false, false, true); /* [rows, D] += h p */
    gc_matmul_into(cols->grad, tile->scores, rows->reps, true, false, true);  /* [cols, D] += h^T q */
}

void gc_loss_tiles_differentiate(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                                 int64_t col_start) {
    for_each_tile(tiles, rows, cols, col_start, differentiate_tile);
}

/* --- after the tiles --- */

gc_status gc_loss_side_normalisation_backward(gc_loss_side *s, int64_t chunk) {
    gc_status status = GC_OK;
    for (int64_t start = 0; s->inv_norm && start < gc_loss_side_count(s) && status == GC_OK; start += chunk) {
        int64_t end = min64(start + chunk, gc_loss_side_count(s));
        gc_loss_side b = gc_loss_side_rows(s, start, end);
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
        gc_loss_side_release(&b);
    }
    return status;
}

gc_tensor *gc_loss_seeded(gc_tensor *grad, double seed, gc_dtype dtype) {
    if (seed != 1) gc_scale_inplace(grad, seed);
    return grad->dtype == dtype ? gc_tensor_retain(grad) : gc_cast(grad, dtype);
}
