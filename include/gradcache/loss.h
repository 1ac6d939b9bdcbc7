/* Losses, and the interface through which GradCache calls one.
 *
 * A loss over the representations of N models is a gc_loss_fn: `forward` computes the
 * scalar with ordinary ops (autograd then gives d loss / d representations). A loss may also
 * offer `value_and_grad`, computing the value and those gradients itself, without a graph:
 * that is how a tiled contrastive loss that never holds the whole B x B score matrix plugs
 * in. GradCache uses value_and_grad when present, forward + backward otherwise. */
#ifndef GRADCACHE_LOSS_H
#define GRADCACHE_LOSS_H

#include <stdbool.h>

#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gc_loss_reduction { GC_LOSS_MEAN, GC_LOSS_SUM } gc_loss_reduction;
typedef enum gc_similarity { GC_SIMILARITY_DOT, GC_SIMILARITY_COSINE } gc_similarity;

/* Cross-entropy of logits [N, C] against i32 targets [N] (each in [0, C)): the mean (or
 * sum) over rows of logsumexp(row) - row[target]. A 0-dim result of logits' dtype; the mean
 * of no rows is nan, as in PyTorch. A target outside [0, C) stops the program: at once on the
 * CPU, at the device's next synchronisation on a GPU, which checks the targets without
 * waiting for them; logits have at most 2^31 elements (the targets are gathered by i32 flat
 * index). */
gc_tensor *gc_cross_entropy(const gc_tensor *logits, const gc_tensor *targets, gc_loss_reduction reduction);

/* In-batch contrastive (InfoNCE) loss. */
typedef struct gc_contrastive_options {
    gc_similarity similarity;    /* cosine normalises both sides first */
    double temperature;          /* scores are divided by it (> 0); a "scale" s is 1/s */
    const gc_tensor *targets;    /* i32 [Nq]: the positive passage of each query; NULL: query
                                    i's positive is passage i * (Np / Nq), as in the reference
                                    (each query followed by its n hard negatives) */
    gc_loss_reduction reduction;
} gc_contrastive_options;

/* queries [Nq, D], passages [Np, D] (Np a multiple of Nq when targets is NULL):
 * cross-entropy of the scores [Nq, Np] = sim(queries, passages) / temperature. Cosine
 * divides each row by sqrt(||x||^2 + eps^2), eps = 1e-12: F.normalize's x / max(||x||, eps)
 * to within an f64 rounding for rows longer than 1e-4. f16 and bf16 inputs are computed in
 * f32 (the loss is f32); f32 and f64 in their own dtype. */
gc_tensor *gc_contrastive_loss(const gc_tensor *queries, const gc_tensor *passages,
                               const gc_contrastive_options *options);

/* The loss interface (see the top of this file). reps[i] is model i's representation
 * [rows_i, D]; `args` is the caller's. */
typedef struct gc_loss_fn {
    gc_tensor *(*forward)(gc_tensor *const *reps, int count, void *args);
    /* Optional (NULL when absent): writes the loss into *value and d loss / d reps[i] into
     * grads[i] (new tensors of reps[i]'s shape); records nothing on the tape. */
    gc_status (*value_and_grad)(gc_tensor *const *reps, int count, void *args, double *value, gc_tensor **grads);
    void *args;
} gc_loss_fn;

/* A gc_loss_fn for gc_contrastive_loss over two representations (queries, passages) with
 * `options` (kept by pointer: it must outlive the gc_loss_fn). */
gc_loss_fn gc_contrastive_loss_fn(const gc_contrastive_options *options);

#ifdef __cplusplus
}
#endif
#endif
