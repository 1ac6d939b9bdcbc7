/* The contrastive loss with several positives per query (loss.h, SupCon's L_out): the mean
 * over c of the one-positive loss whose targets are every query's c-th positive. Because the
 * loss is that mean, its value and gradients are the means of the one-positive losses' (the
 * gradients are linear in them): each one-positive loss runs as it would alone (untiled,
 * tiled, across processes), with seed / k, and nothing here differentiates by hand. */
#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

/* i32 [Nq]: query i's c-th positive, targets[:, c] or i * (Np / Nq) + c. */
static gc_tensor *positive_column(const gc_tensor *queries, const gc_tensor *passages,
                                  const gc_contrastive_options *options, int64_t c) {
    int64_t n_queries = queries->shape[0];
    if (!options->targets) {
        double stride = n_queries ? (double)(passages->shape[0] / n_queries) : 0;
        return gc_arange(n_queries, (double)c, stride, GC_I32, queries->device);
    }
    gc_tensor *by_column = gc_transpose(options->targets, 0, 1); /* [k, Nq] */
    gc_tensor *row = by_column ? gc_slice0(by_column, c, c + 1) : NULL;
    gc_tensor *column = row ? gc_reshape(row, GC_SHAPE(n_queries)) : NULL;
    GC_RELEASE_ALL(by_column, row);
    return column;
}

/* options with one positive, targets[:, c] (new in *column) */
static gc_contrastive_options one_positive(const gc_tensor *queries, const gc_tensor *passages,
                                           const gc_contrastive_options *options, int64_t c, gc_tensor **column) {
    gc_contrastive_options one = *options;
    *column = positive_column(queries, passages, options, c);
    one.targets = *column;
    one.positives = 1;
    return one;
}

gc_tensor *gc_contrastive_multi_loss(const gc_tensor *queries, const gc_tensor *passages,
                                     const gc_contrastive_options *options) {
    int64_t k = gc_contrastive_positive_count(options);
    gc_tensor *total = NULL;
    for (int64_t c = 0; c < k; c++) {
        gc_tensor *column;
        gc_contrastive_options one = one_positive(queries, passages, options, c, &column);
        gc_tensor *term = column ? gc_contrastive_loss(queries, passages, &one) : NULL;
        gc_tensor *sum = c == 0 ? gc_tensor_retain(term) : gc_add(total, term);
        GC_RELEASE_ALL(column, term, total);
        total = sum;
        if (!total) return NULL;
    }
    gc_tensor *mean = gc_mul_scalar(total, 1.0 / (double)k);
    gc_tensor_release(total);
    return mean;
}

gc_status gc_contrastive_multi_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                              const gc_contrastive_options *options, gc_contrastive_method method,
                                              double seed, double *value, gc_tensor **grad_queries,
                                              gc_tensor **grad_passages) {
    int64_t k = gc_contrastive_positive_count(options);
    gc_tensor *sums[2] = {NULL, NULL}; /* the gradients' running sums, [Nq, D] and [Np, D] */
    gc_status status = GC_OK;
    double total = 0;
    bool previous = gc_set_grad_enabled(false);
    for (int64_t c = 0; c < k && status == GC_OK; c++) {
        gc_tensor *column, *grads[2] = {NULL, NULL};
        gc_contrastive_options one = one_positive(queries, passages, options, c, &column);
        one.method = method;
        double term = 0;
        status = column ? gc_contrastive_value_and_grad(queries, passages, &one, seed / (double)k, &term, &grads[0],
                                                        &grads[1])
                        : gc_last_status();
        total += term;
        for (int s = 0; s < 2 && status == GC_OK; s++) {
            if (!sums[s]) sums[s] = gc_tensor_retain(grads[s]);
            else status = gc_add_inplace(sums[s], grads[s]);
        }
        GC_RELEASE_ALL(column, grads[0], grads[1]);
    }
    gc_set_grad_enabled(previous);
    if (status != GC_OK) {
        GC_RELEASE_ALL(sums[0], sums[1]);
        return status;
    }
    *value = total / (double)k;
    *grad_queries = sums[0];
    *grad_passages = sums[1];
    return GC_OK;
}
