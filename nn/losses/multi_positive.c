/* The contrastive loss with several positives per query (loss.h, SupCon's L_out): the mean
 * over c of the one-positive loss whose targets are every query's c-th positive. Because the
 * loss is that mean, its value and gradients are the means of the one-positive losses' (the
 * gradients are linear in them): each one-positive loss runs as it would alone (untiled,
 * tiled, around the ring of a process group), with seed / k, and nothing here differentiates
 * by hand. */
#include "contrastive_internal.h"
#include "contrastive_ring.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

/* i32 [Nq]: query i's c-th positive, targets[:, c] (the targets' Nq rows: around the ring, the
 * global batch's) or i * (Np / Nq) + c. */
static gc_tensor *positive_column(const gc_tensor *queries, const gc_tensor *passages,
                                  const gc_contrastive_options *options, int64_t c) {
    if (!options->targets) {
        int64_t n_queries = queries->shape[0];
        double stride = n_queries ? (double)(passages->shape[0] / n_queries) : 0;
        return gc_arange(n_queries, (double)c, stride, GC_I32, queries->device);
    }
    gc_tensor *by_column = gc_transpose(options->targets, 0, 1); /* [k, Nq] */
    gc_tensor *row = by_column ? gc_slice0(by_column, c, c + 1) : NULL;
    gc_tensor *column = row ? gc_reshape(row, GC_SHAPE(options->targets->shape[0])) : NULL;
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

/* The c-th one-positive loss: locally as `method` says, or with a group one pass of its ring
 * (whose default targets it offsets by c itself: only the ring knows the global batch). */
static gc_status one_value_and_grad(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_contrastive_options *options, gc_contrastive_method method, int64_t c,
                                    double seed, double *value, gc_tensor **grads) {
    int64_t k = gc_contrastive_positive_count(options);
    gc_tensor *column = NULL;
    gc_contrastive_options one = *options;
    one.positives = 1;
    if (!group || options->targets) {
        one = one_positive(queries, passages, options, c, &column);
        if (!column) return gc_last_status();
    }
    one.method = method;
    gc_status status =
        group ? gc_ring_loss_run(group, queries, passages, &one, NULL, (ring_target){c, k}, seed, value, &grads[0],
                                 &grads[1])
              : gc_contrastive_value_and_grad(queries, passages, &one, seed, value, &grads[0], &grads[1]);
    gc_tensor_release(column);
    return status;
}

/* The mean of the k one-positive losses and the sums of their gradients (each seeded seed / k). */
static gc_status multi_value_and_grad(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                      const gc_contrastive_options *options, gc_contrastive_method method,
                                      double seed, double *value, gc_tensor **grad_queries,
                                      gc_tensor **grad_passages) {
    int64_t k = gc_contrastive_positive_count(options);
    gc_tensor *sums[2] = {NULL, NULL}; /* the gradients' running sums, [Nq, D] and [Np, D] */
    gc_status status = GC_OK;
    double total = 0;
    bool previous = gc_set_grad_enabled(false);
    for (int64_t c = 0; c < k && status == GC_OK; c++) {
        gc_tensor *grads[2] = {NULL, NULL};
        double term = 0;
        status = one_value_and_grad(group, queries, passages, options, method, c, seed / (double)k, &term, grads);
        total += term;
        for (int s = 0; s < 2 && status == GC_OK; s++) {
            if (!sums[s]) sums[s] = gc_tensor_retain(grads[s]);
            else status = gc_add_inplace(sums[s], grads[s]);
        }
        GC_RELEASE_ALL(grads[0], grads[1]);
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

gc_status gc_contrastive_multi_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                              const gc_contrastive_options *options, gc_contrastive_method method,
                                              double seed, double *value, gc_tensor **grad_queries,
                                              gc_tensor **grad_passages) {
    return multi_value_and_grad(NULL, queries, passages, options, method, seed, value, grad_queries, grad_passages);
}

gc_status gc_contrastive_multi_group_value_and_grad(gc_process_group *group, const gc_tensor *queries,
                                                    const gc_tensor *passages, const gc_contrastive_options *options,
                                                    double seed, double *value, gc_tensor **grad_queries,
                                                    gc_tensor **grad_passages) {
    const gc_tensor *targets = options->targets;
    int64_t k = gc_contrastive_positive_count(options);
    if (targets && (targets->dtype != GC_I32 || targets->ndim != 2 || targets->shape[1] != k)) {
        char text[128];
        gc_fatal("contrastive_loss_ring: needs i32 targets [global Nq, %lld] for %lld positives each, got %s",
                 (long long)k, (long long)k, gc_tensor_str(targets, text, sizeof text));
    }
    /* the ring always tiles: the method is not used */
    return multi_value_and_grad(group, queries, passages, options, GC_CONTRASTIVE_TILED, seed, value, grad_queries,
                                grad_passages);
}
