/* What the untiled contrastive loss (contrastive.c) and the tiled one (contrastive_tiled.c)
 * share: the argument checks, the targets, the finiteness check and the working precision. */
#ifndef GC_NN_CONTRASTIVE_INTERNAL_H
#define GC_NN_CONTRASTIVE_INTERNAL_H

#include "gradcache/loss.h"

/* Cosine normalises a row as x / sqrt(||x||^2 + eps^2). That is F.normalize's
 * x / max(||x||, eps) to a relative eps^2 / (2 ||x||^2), below an f64 rounding for
 * ||x|| > 1e-4, and like it maps a zero row to 0 with the gradient g / eps there; it needs
 * no max op. */
#define GC_COSINE_EPS 1e-12

/* Releases every tensor listed, NULLs included: GC_RELEASE_ALL(a, b, c). */
#define GC_RELEASE_ALL(...)                                                                     \
    do {                                                                                        \
        gc_tensor *gc_release_list_[] = {__VA_ARGS__};                                          \
        for (size_t gc_release_i_ = 0; gc_release_i_ < sizeof gc_release_list_ / sizeof *gc_release_list_; \
             gc_release_i_++)                                                                   \
            gc_tensor_release(gc_release_list_[gc_release_i_]);                                 \
    } while (0)

/* Stops the program (one line) on arguments no call could make sense of: shapes, dtypes,
 * devices, the similarity, the temperature, the targets' shape, the tile size. */
void gc_contrastive_check_arguments(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_contrastive_options *options);
/* The checks of gc_contrastive_check_arguments but the targets'. */
void gc_contrastive_check_options(const gc_tensor *queries, const gc_tensor *passages,
                                  const gc_contrastive_options *options);
/* targets are i32 [n_queries] on queries' device; `op` names the loss in the one line that
 * stops the program. */
void gc_contrastive_check_targets(const char *op, const gc_tensor *queries, int64_t n_queries,
                                  const gc_tensor *targets);

/* Positives per query: options->positives, 0 counting as 1. */
int64_t gc_contrastive_positive_count(const gc_contrastive_options *options);

/* The loss with several positives per query (loss.h): the mean of the one-positive losses,
 * one per positive (multi_positive.c). */
gc_tensor *gc_contrastive_multi_loss(const gc_tensor *queries, const gc_tensor *passages,
                                     const gc_contrastive_options *options);
/* Its value and gradients; `method` the one-positive losses' (the tiled loss passes its own). */
gc_status gc_contrastive_multi_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                              const gc_contrastive_options *options, gc_contrastive_method method,
                                              double seed, double *value, gc_tensor **grad_queries,
                                              gc_tensor **grad_passages);
/* The same around the ring of a process group (gc_contrastive_loss_ring's arguments: targets,
 * when given, are the global batch's [global Nq, k]): k passes of the ring, one per positive. */
gc_status gc_contrastive_multi_group_value_and_grad(gc_process_group *group, const gc_tensor *queries,
                                                    const gc_tensor *passages, const gc_contrastive_options *options,
                                                    double seed, double *value, gc_tensor **grad_queries,
                                                    gc_tensor **grad_passages);

/* The i32 targets [Nq]: options->targets (retained) or query i -> passage i * (Np / Nq).
 * Every target is checked to be a passage (read back to the host: a synchronisation on a
 * GPU). NULL on an allocation error. */
gc_tensor *gc_contrastive_targets(const gc_tensor *queries, const gc_tensor *passages,
                                  const gc_contrastive_options *options);

/* GC_ERR_NON_FINITE with the message "<who> query row 3 of [6, 4] f32 cpu holds an inf or a
 * nan" (or passage) for the first row of queries or passages holding one; GC_OK when every
 * row is finite (or an allocation error). Read back `chunk` rows at a time; records nothing
 * on the tape. */
gc_status gc_contrastive_find_non_finite(const char *who, const gc_tensor *queries, const gc_tensor *passages,
                                         int64_t chunk);

/* After the loss came out as `value`, an inf or a nan: GC_ERR_NON_FINITE with a message
 * naming the side and the first row holding an inf or a nan, or, when every representation is
 * finite, the scores' overflow at the temperature (or an allocation error). The inputs are
 * read back only here, on the failure path: a finite loss costs no check and no wait for the
 * device. Works through `chunk` rows at a time; records nothing on the tape. */
gc_status gc_contrastive_explain_non_finite(const gc_tensor *queries, const gc_tensor *passages,
                                            const gc_contrastive_options *options, double value, int64_t chunk);

/* x [N, D] in working precision (gc_to_working), each row normalised for cosine (recorded). */
gc_tensor *gc_contrastive_prepare(const gc_tensor *x, gc_similarity similarity);

/* A loss over (queries, passages) built from recorded ops, with its own arguments. */
typedef gc_tensor *(*gc_pair_loss)(const gc_tensor *queries, const gc_tensor *passages, const void *args);
/* loss_of's value and grads[0], grads[1] = seed d loss / d queries, d loss / d passages by
 * autograd, on leaves that share the inputs' storage: the inputs' own graph and gradients are
 * left alone. A non-finite loss is explained (gc_contrastive_explain_non_finite) with
 * options' temperature and tile. The untiled value_and_grad of the contrastive losses. */
gc_status gc_contrastive_autograd(gc_pair_loss loss_of, const void *args, const gc_tensor *queries,
                                  const gc_tensor *passages, const gc_contrastive_options *options, double seed,
                                  double *value, gc_tensor **grads);

/* options->tile_size, or the device's largest default tile: the method
 * GC_CONTRASTIVE_AUTO tiles above it. */
int64_t gc_contrastive_largest_tile(const gc_contrastive_options *options, gc_device device);

/* w, the weight of one query's term in one direction over `n_queries` queries (of the whole
 * batch): 1 for a sum, 1 / n_queries for a mean (nan for none, as the untiled loss), halved
 * when symmetric (the mean of the two directions). */
double gc_contrastive_weight(const gc_contrastive_options *options, int64_t n_queries);

/* The larger of the two sides' row counts. */
int64_t gc_contrastive_rows(const gc_tensor *queries, const gc_tensor *passages);

#endif
