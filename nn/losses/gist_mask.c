/* The guide's masks of the GIST loss (gist_internal.h).
 *
 * Exact without a comparison op: the first maximum of the pair (0, x) is x exactly when
 * x > 0, so its index, 0 or 1, is the indicator [x > 0]; and a guide score exceeds the
 * threshold exactly when their difference is positive (the difference of two distinct floats
 * is never 0). log(1 - mask) is then the 0 or -inf added to the student's score. */
#include <math.h>

#include "gist_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
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

void gc_gist_check_options(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *o) {
    if (!o) gc_fatal("gist_loss: options is NULL");
    gc_contrastive_check_arguments(queries, passages, &o->contrastive);
    gc_gist_check_guide(queries, passages, o);
}

void gc_gist_check_guide(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *o) {
    const gc_contrastive_options *c = &o->contrastive;
    if (gc_contrastive_positive_count(c) > 1 || c->symmetric)
        gc_fatal("gist_loss: %lld positives, symmetric %d: one positive, one direction",
                 (long long)gc_contrastive_positive_count(c), (int)c->symmetric);
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

/* [R, C] of `dtype`: 1 where x [R, C] > 0, else 0. */
static gc_tensor *positive_indicator(const gc_tensor *x, gc_dtype dtype) {
    int64_t rows = x->shape[0], cols = x->shape[1];
    gc_tensor *zeros = gc_zeros_like(x);
    gc_tensor *pair[2] = {gc_reshape(zeros, GC_SHAPE(1, rows, cols)), gc_reshape(x, GC_SHAPE(1, rows, cols))};
    gc_tensor *stacked = gc_cat0(pair, 2);                         /* [2, R, C] */
    gc_tensor *last = gc_permute(stacked, (const int[]){1, 2, 0}); /* [R, C, 2]: (0, x) */
    gc_tensor *index = NULL;
    gc_tensor *largest = last ? gc_max_last(last, false, &index) : NULL;
    gc_tensor *indicator = largest ? gc_cast(index, dtype) : NULL;
    GC_RELEASE_ALL(zeros, pair[0], pair[1], stacked, last, index, largest);
    return indicator;
}

/* [R, C] of `dtype`: 0 at (i, targets[i] - col), 1 elsewhere; the column numbers in f64, exact
 * for any i32 index. */
static gc_tensor *not_positive(const gc_tensor *targets, int64_t col, int64_t cols, gc_dtype dtype) {
    int64_t rows = targets->shape[0];
    gc_tensor *columns = gc_arange(cols, (double)col, 1, GC_F64, targets->device); /* [C] */
    gc_tensor *wide = gc_cast(targets, GC_F64);
    gc_tensor *positives = gc_reshape(wide, GC_SHAPE(rows, 1));
    gc_tensor *offset = gc_sub(columns, positives); /* [R, C]: j - t_i */
    gc_tensor *negated = gc_neg(offset);
    gc_tensor *above = gc_relu(offset), *below = gc_relu(negated);
    gc_tensor *distance = gc_add(above, below); /* |j - t_i| */
    gc_tensor *other = distance ? positive_indicator(distance, dtype) : NULL;
    GC_RELEASE_ALL(columns, wide, positives, offset, negated, above, below, distance);
    return other;
}

gc_tensor *gc_gist_mask(const gc_gist_guide *guide, int block, int64_t row, int64_t rows, int64_t col,
                        int64_t cols) {
    const gc_tensor *row_side = block == 2 ? guide->positives : guide->queries;
    const gc_tensor *col_side = guide->columns[block];
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *a = gc_slice0(row_side, row, row + rows), *b = gc_slice0(col_side, col, col + cols);
    gc_tensor *threshold = gc_slice0(guide->threshold, row, row + rows);
    gc_tensor *scores = gc_matmul(a, b, false, true); /* [R, C] */
    gc_tensor *excess = gc_sub(scores, threshold);
    gc_tensor *masked = excess ? positive_indicator(excess, guide->dtype) : NULL;
    gc_tensor *targets = block == 0 ? gc_slice0(guide->targets, row, row + rows) : NULL;
    gc_tensor *others = targets ? not_positive(targets, guide->column_offset + col, cols, guide->dtype) : NULL;
    gc_tensor *candidates = block == 0 ? gc_mul(masked, others) : gc_tensor_retain(masked);
    gc_tensor *keep = gc_rsub_scalar(candidates, 1); /* 1 kept, 0 masked */
    gc_tensor *bias = gc_log(keep);
    GC_RELEASE_ALL(a, b, threshold, scores, excess, masked, targets, others, candidates, keep);
    gc_set_grad_enabled(previous);
    return bias;
}

/* The threshold [Nq, 1] of each query: the guide's score of its positive (a row's dot
 * product, so that no [Nq, Np] matrix is needed) less the margin. A candidate scored within a
 * rounding of it may fall on either side, as in PyTorch, where the side depends on the BLAS. */
static gc_tensor *thresholds(const gc_gist_guide *guide, const gc_gist_options *o) {
    gc_tensor *products = gc_mul(guide->queries, guide->positives);
    gc_tensor *positive = gc_sum_last(products, true); /* [Nq, 1] */
    gc_tensor *threshold = o->margin_strategy == GC_GIST_ABSOLUTE ? gc_sub_scalar(positive, o->margin)
                                                                  : gc_mul_scalar(positive, 1 - o->margin);
    GC_RELEASE_ALL(products, positive);
    return threshold;
}

gc_status gc_gist_guide_init(gc_gist_guide *guide, const gc_gist_options *options, const gc_tensor *targets,
                             gc_dtype dtype) {
    bool previous = gc_set_grad_enabled(false);
    *guide = (gc_gist_guide){.dtype = dtype, .targets = gc_tensor_retain((gc_tensor *)targets)};
    guide->queries = gc_contrastive_prepare(options->guide_queries, GC_SIMILARITY_COSINE);
    guide->passages = gc_contrastive_prepare(options->guide_passages, GC_SIMILARITY_COSINE);
    guide->positives = gc_embedding(guide->passages, targets);
    guide->threshold = guide->positives ? thresholds(guide, options) : NULL;
    gc_set_grad_enabled(previous);
    guide->columns[0] = guide->passages;
    guide->columns[1] = guide->queries;
    guide->columns[2] = guide->positives;
    return guide->threshold ? GC_OK : gc_last_status();
}

void gc_gist_guide_release(gc_gist_guide *guide) {
    GC_RELEASE_ALL(guide->queries, guide->passages, guide->positives, guide->threshold, guide->targets);
    *guide = (gc_gist_guide){0};
}
