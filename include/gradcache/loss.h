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

#include "gradcache/dist.h"
#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gc_loss_reduction { GC_LOSS_MEAN, GC_LOSS_SUM } gc_loss_reduction;
typedef enum gc_similarity { GC_SIMILARITY_DOT, GC_SIMILARITY_COSINE } gc_similarity;

/* Cross-entropy of logits [N, C] against i32 targets [N] (each in [0, C)): the mean (or
 * sum) over rows of logsumexp(row) - row[target]. A 0-dim result of logits' working dtype
 * (f16 and bf16 logits are computed in f32, the loss is f32); the mean of no rows is nan, as
 * in PyTorch. A target outside [0, C) stops the program: at once on the CPU, at the device's
 * next synchronisation on a GPU, which checks the targets without waiting for them; logits
 * have at most 2^31 elements (the targets are gathered by i32 flat index). */
gc_tensor *gc_cross_entropy(const gc_tensor *logits, const gc_tensor *targets, gc_loss_reduction reduction);

/* How the contrastive loss's gradient is computed where a gc_loss_fn offers value_and_grad
 * (GradCache's loss phase): the forward, gc_contrastive_loss, is always the untiled reference. */
typedef enum gc_contrastive_method {
    GC_CONTRASTIVE_AUTO,  /* tiled when either side has more rows than the device's largest tile
                             (or than tile_size, when given), else full */
    GC_CONTRASTIVE_TILED, /* gc_contrastive_loss_tiled */
    GC_CONTRASTIVE_FULL   /* the reference through autograd: a B x B matrix and its gradient */
} gc_contrastive_method;

/* The largest default tile: big enough to keep the matmuls efficient (and, on a GPU, the
 * kernel launches few), small next to the batches that need tiling (tile^2 f32 is 1 MiB on
 * the CPU, 64 MiB on a GPU). */
#define GC_CONTRASTIVE_TILE_CPU 512
#define GC_CONTRASTIVE_TILE_CUDA 4096

/* In-batch contrastive (InfoNCE) loss. A zero-initialised tail (symmetric, method,
 * tile_size) is the one-directional loss, tiled where that saves memory. */
typedef struct gc_contrastive_options {
    gc_similarity similarity;    /* cosine normalises both sides first */
    double temperature;          /* scores are divided by it (> 0); a "scale" s is 1/s */
    const gc_tensor *targets;    /* i32 [Nq] (one positive) or [Nq, positives]: the positive
                                    passages of each query; NULL: query i's positives are
                                    passages i * (Np / Nq) + c, c < positives, as in the
                                    reference (each query followed by its positives, then its
                                    hard negatives) */
    gc_loss_reduction reduction;
    bool symmetric;              /* also passage -> query (CLIP): see gc_contrastive_loss */
    gc_contrastive_method method;
    int64_t tile_size;           /* rows (and columns) per tile (>= 1); 0: the default,
                                    gc_contrastive_tile_size */
    int64_t positives;           /* positives per query (0 or 1: one); see below */
} gc_contrastive_options;

/* Several positives per query (SupCon's L_out, arXiv 2004.11362): with k = positives > 1 the
 * loss is the mean over c < k of the one-positive loss whose target is query i's c-th positive,
 *   loss_i = lse_i - (1/k) sum_c s_i,t_ic,
 * every other passage of the batch (a query's other positives included, as in SupCon's
 * denominator) a candidate in lse_i. Symmetric: the mean over c of the symmetric loss with
 * target c. Computed as exactly that: k one-positive losses (full, tiled or automatic as
 * `method` says), so the loss phase costs k times a one-positive loss's. */

/* queries [Nq, D], passages [Np, D] (Np a multiple of Nq when targets is NULL):
 * cross-entropy of the scores [Nq, Np] = sim(queries, passages) / temperature. Cosine
 * divides each row by sqrt(||x||^2 + eps^2), eps = 1e-12: F.normalize's x / max(||x||, eps)
 * to within an f64 rounding for rows longer than 1e-4. f16 and bf16 inputs are computed in
 * f32 (the loss is f32); f32 and f64 in their own dtype.
 * Symmetric: the mean of that loss and the passage -> query one, in which the passage that is
 * query i's positive is scored against every query (column t_i of the scores) with query i as
 * its target: 0.5 (CE(scores, t) + CE(scores[:, t]^T, 0..Nq-1)), each term reduced as
 * `reduction` says. With hard negatives, a negative is a candidate for every query but is
 * nobody's positive, so it has no term of its own (sentence-transformers' symmetric loss).
 * The untiled reference: it holds the B x B scores (and autograd their gradient). It reads
 * nothing back from the device: a non-finite representation gives a non-finite loss, as in
 * PyTorch (gc_contrastive_value_and_grad turns that into GC_ERR_NON_FINITE naming the row). */
gc_tensor *gc_contrastive_loss(const gc_tensor *queries, const gc_tensor *passages,
                               const gc_contrastive_options *options);

/* The same loss, its value and gradients d loss / d queries and d loss / d passages (new
 * tensors of their shapes and dtypes) computed tile by tile without a graph (Inf-CL,
 * arXiv 2410.17243; docs/DESIGN.md): the forward keeps a running log-sum-exp per query row
 * (and per passage column when symmetric), the gradient recomputes each tile's scores from
 * them. Working memory is one tile of scores plus O(Nq + Np) numbers (and, for f16 or bf16
 * inputs, f32 copies of the representations and of their gradients): never Nq x Np.
 * Nq and Np may differ, as with representations gathered from several processes.
 * Returns GC_OK, an allocation error, or GC_ERR_NON_FINITE when a representation holds an inf
 * or a nan (the message names the side and the row) or the scores overflow; nothing is kept
 * then. The loss value is the one read from the device; the inputs are read back (to name
 * the row) only after it came out non-finite. A NULL input returns the error already recorded. The gradients are seed times
 * d loss / d input (seed: 1, or a loss scale, applied in f32 before the gradients are
 * rounded into a 16-bit dtype; see gc_loss_fn.value_and_grad). */
gc_status gc_contrastive_loss_tiled(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_contrastive_options *options, double seed, double *value,
                                    gc_tensor **grad_queries, gc_tensor **grad_passages);

/* The same loss over the global batch of a process group, without gathering it: the ring of
 * Inf-CL (docs/DESIGN.md, "The ring loss"). queries [nq, D] and passages [np, D] are this
 * rank's rows; the global queries and passages are every rank's in rank order (the rows may
 * differ per rank, zero included). Each rank keeps its queries; the passage blocks travel once
 * around the ring for the log-sum-exps (with the passages' running column sums, symmetric)
 * and once more for the gradients, each block's gradient travelling with it back to its
 * owner; the next block's transfer overlaps the current block's tiles. *value is the global
 * loss, the same on every rank; the gradients are seed times d loss / d this rank's rows --
 * what the tiled loss over the gathered batch gives for these rows -- in the inputs' dtypes.
 * options as for the tiled loss, except: targets, when given, are the global batch's, i32
 * [global Nq] indexing the global passages, the same on every rank (NULL: global query i's
 * positive is global passage i (Np / Nq); with k positives, [global Nq, k], NULL: query i's
 * c-th is passage i (Np / Nq) + c, computed as k passes of the ring, one per positive, so at
 * k times the cost); method is not used (the ring always tiles); the
 * tile is sized by this rank's rows. Every rank must call it with the same options, D and
 * dtype (checked: a difference stops the program naming both ranks).
 * Memory per rank beyond its inputs: its queries' gradient, and two blocks and two block
 * gradients in flight (its passages' gradient arrives in one of them): about 5 (B / N) D
 * working-precision numbers for B rows per side over N ranks, one tile of scores and
 * O(B / N) numbers -- never the global batch (explicit targets and the counts of their
 * positives are O(B) numbers). Sent per rank: 2 (N - 1) blocks of rows
 * and N block gradients, plus O(B / N) numbers per step.
 * Returns GC_OK; an allocation error (the buffers are made before anything travels, and the
 * ranks agree on it: the others return GC_ERR_PEER); GC_ERR_NON_FINITE on every rank when the
 * loss is not finite (a rank's message names its own bad row, or says its rows are finite);
 * GC_ERR_PEER when a peer fails or stalls (the group's timeout). Nothing is kept on error. */
gc_status gc_contrastive_loss_ring(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                   const gc_contrastive_options *options, double seed, double *value,
                                   gc_tensor **grad_queries, gc_tensor **grad_passages);

/* The tile the loss uses for a batch whose larger side has `rows` rows on `device`:
 * options->tile_size when set, else rows / 32 (so one tile of scores is at most 0.1% of the
 * rows x rows matrix) kept between 512 and the device's largest tile (GC_CONTRASTIVE_TILE_CPU
 * or _CUDA). */
int64_t gc_contrastive_tile_size(const gc_contrastive_options *options, gc_device device, int64_t rows);

/* The value and the gradients as options->method chooses: tiled, or the reference
 * differentiated by autograd (on detached copies of the inputs: nothing is recorded and the
 * inputs' own gradients are untouched; the backward is seeded with `seed`). What
 * gc_contrastive_loss_fn's value_and_grad runs. */
gc_status gc_contrastive_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                        const gc_contrastive_options *options, double seed, double *value,
                                        gc_tensor **grad_queries, gc_tensor **grad_passages);

/* The loss interface (see the top of this file). reps[i] is model i's representation
 * [rows_i, D]; `args` is the caller's. */
typedef struct gc_loss_fn {
    gc_tensor *(*forward)(gc_tensor *const *reps, int count, void *args);
    /* Optional (NULL when absent): writes the loss into *value and seed times d loss / d reps[i]
     * into grads[i] (new tensors of reps[i]'s shape and dtype); records nothing on the tape.
     * seed is what a backward would be seeded with (1, or a loss scale): it must multiply
     * the gradient before that is rounded into a 16-bit dtype, where small values of the
     * unscaled gradient would already have flushed to zero. */
    gc_status (*value_and_grad)(gc_tensor *const *reps, int count, void *args, double seed, double *value,
                                gc_tensor **grads);
    /* Optional: the loss over a process group's global batch without gathering it (the ring
     * contrastive loss): reps[i] are this rank's rows of model i's representations; writes the
     * global loss (the same on every rank) and seed times d loss / d reps[i] into grads[i], as
     * value_and_grad does. Every rank calls it at once: it runs collectives. GradCache uses it
     * across processes as gc_cache_config.global_loss says. */
    gc_status (*group_value_and_grad)(gc_process_group *group, gc_tensor *const *reps, int count, void *args,
                                      double seed, double *value, gc_tensor **grads);
    void *args;
} gc_loss_fn;

/* A gc_loss_fn for gc_contrastive_loss over two representations (queries, passages) with
 * `options` (kept by pointer: it must outlive the gc_loss_fn). Its value_and_grad is
 * gc_contrastive_value_and_grad, except with GC_CONTRASTIVE_FULL, where it is NULL (GradCache
 * then runs the forward and its own backward, through gc_cache_config.backward); its
 * group_value_and_grad is gc_contrastive_loss_ring. */
gc_loss_fn gc_contrastive_loss_fn(const gc_contrastive_options *options);

/* --- Matryoshka representations (arXiv 2205.13147) ---
 * The base loss summed, with weights, over nested prefixes of every representation:
 *   loss = sum_j w_j base(reps[0][:, :d_j], reps[1][:, :d_j], ...)
 * so that each prefix is an embedding of its own (cosine renormalises each prefix). Computed on
 * the representations GradCache caches, so one cache carries every prefix's gradient. Its
 * value_and_grad is the base's at each prefix (seeded with seed w_j) added into the columns
 * [0, d_j) of each gradient; NULL when the base has none (GradCache then differentiates the
 * forward). Costs one base loss per prefix. */
#define GC_MATRYOSHKA_MAX_DIMS 8
#define GC_LOSS_MAX_REPS 8 /* the representations it takes: as many as a cache has models */

typedef struct gc_matryoshka_options {
    gc_loss_fn base;                        /* the loss at each prefix */
    int count;                              /* prefixes: 1 to GC_MATRYOSHKA_MAX_DIMS */
    int64_t dims[GC_MATRYOSHKA_MAX_DIMS];   /* each prefix's length, in [1, D] */
    double weights[GC_MATRYOSHKA_MAX_DIMS]; /* each prefix's weight (finite) */
} gc_matryoshka_options;

/* The loss over reps[i] [N_i, D] (recorded, so autograd differentiates it). */
gc_tensor *gc_matryoshka_loss(gc_tensor *const *reps, int count, const gc_matryoshka_options *options);
/* A gc_loss_fn for it (options kept by pointer: they must outlive it). */
gc_loss_fn gc_matryoshka_loss_fn(const gc_matryoshka_options *options);
/* x [N, D] -> its first d columns [N, d], a new tensor (recorded; d in [1, D]). */
gc_tensor *gc_matryoshka_prefix(const gc_tensor *x, int64_t d);

/* --- Guided false-negative filtering (GISTEmbed, arXiv 2402.16829) ---
 * A frozen guide encoder's representations of the same batch decide which in-batch candidates
 * are false negatives. As sentence-transformers' GISTEmbedLoss, each query i's logits are the
 * student's scores (temperature and similarity as in `contrastive`) over three blocks,
 *   [ s(q_i, p_j) for every passage j | s(q_i, q_k) for every query k | s(p_t_i, p_t_k) for k ]
 * (p_t_i: query i's positive; hard negatives are passages, so they are in the first block, as
 * GISTEmbedLoss's anchor-negative block), and loss_i = lse_i - s(q_i, p_t_i). A candidate is
 * masked out (its logit -inf) when the guide's cosine of the same pair exceeds the threshold
 *   absolute: g(q_i, p_t_i) - margin,   relative: g(q_i, p_t_i) (1 - margin),
 * the positive itself never. The guide's scores are compared, never differentiated: the
 * gradient flows to the student's representations only. */
typedef enum gc_gist_margin { GC_GIST_ABSOLUTE, GC_GIST_RELATIVE } gc_gist_margin;

typedef struct gc_gist_options {
    gc_contrastive_options contrastive; /* the student's loss: one positive, not symmetric; method
                                           and tile_size as for the contrastive loss */
    const gc_tensor *guide_queries;     /* [Nq, Dg]: the guide's representations of the queries */
    const gc_tensor *guide_passages;    /* [Np, Dg]: and of the passages (any float dtype) */
    gc_gist_margin margin_strategy;
    double margin;                      /* finite; 0: mask what the guide scores above the positive */
} gc_gist_options;

/* The loss over queries [Nq, D] and passages [Np, D] (recorded, so autograd differentiates it).
 * Holds the [Nq, Np + 2 Nq] logits and the guide's scores of the same shape. */
gc_tensor *gc_gist_loss(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options);
/* The same loss, its value and seed times its gradients (new tensors of the inputs' shapes and
 * dtypes) tile by tile without a graph, as gc_contrastive_loss_tiled (same tiles, errors and
 * seed): each tile's scores plus the guide's mask of that tile, computed with it, so no
 * Nq x Np matrix exists, the student's or the guide's; the guide's unit rows are copied once
 * (f32 for a 16-bit guide, as the student's). */
gc_status gc_gist_loss_tiled(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options,
                             double seed, double *value, gc_tensor **grad_queries, gc_tensor **grad_passages);
/* The value and gradients as options->contrastive.method chooses: tiled, or the untiled loss
 * differentiated by autograd on detached copies (as gc_contrastive_value_and_grad). */
gc_status gc_gist_value_and_grad(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options,
                                 double seed, double *value, gc_tensor **grad_queries, gc_tensor **grad_passages);
/* The same loss over the global batch of a process group, without gathering it: the ring
 * contrastive loss's passes (gc_contrastive_loss_ring: its arguments, options, results, errors
 * and checks of agreement) with each rank's block carrying its passages, its queries and its
 * queries' positives -- the columns of the three blocks of logits -- and the guide's unit rows of
 * each, so that every tile is masked as gc_gist_loss_tiled masks it over the gathered batch.
 * queries [nq, D], passages [np, D] and the guide's rows (options->guide_queries [nq, Dg],
 * guide_passages [np, Dg]) are this rank's; targets, when given, the global batch's. Each query's
 * positive must be one of its own rank's passages (checked: stops the program naming it), as
 * when each rank holds its own examples' passages. Sent per rank: 2 (N - 1) blocks of
 * (np + 2 nq) rows of D and of Dg numbers, and N block gradients. */
gc_status gc_gist_loss_ring(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                            const gc_gist_options *options, double seed, double *value, gc_tensor **grad_queries,
                            gc_tensor **grad_passages);
/* A gc_loss_fn for it over (queries, passages); options kept by pointer, and read at each call,
 * so the caller sets the guide's representations of each step's batch. Across processes they
 * are the global batch's (gathered as the cache gathers the student's) for the gathered loss,
 * and this rank's own for the ring (gc_cache_config.global_loss RING, which the caller must
 * then ask for: under AUTO the choice is made after the guide's rows are set). Its
 * value_and_grad is gc_gist_value_and_grad, NULL with GC_CONTRASTIVE_FULL (as the contrastive
 * loss's); its group_value_and_grad is gc_gist_loss_ring. */
gc_loss_fn gc_gist_loss_fn(const gc_gist_options *options);

/* --- Distillation from a teacher's scores ---
 * Each query i comes with its candidates [p_i, n_i1 .. n_ik] (passages i (1 + k) .. i (1 + k) + k:
 * its positive, then its k >= 1 hard negatives, the pair file's order) and a teacher's scores
 * t_ij of them (j = 0: the positive). The student's scores are s_ij = sim(q_i, c_ij), dot
 * product or cosine as `similarity` says (sentence-transformers' default is the dot product),
 * not divided by any temperature but the KL's own.
 *   MarginMSE (Hofstaetter et al. 2020; sentence-transformers' MarginMSELoss):
 *     mean over i and j = 1..k of ((s_i0 - s_ij) - (t_i0 - t_ij))^2.
 *   Listwise KL (RocketQAv2; sentence-transformers' DistillKLDivLoss):
 *     tau_s^2 mean over i of KL(softmax(t_i / tau_t) || softmax(s_i / tau_s)) over the 1 + k
 *     candidates, KL(p || q) = sum_j p_j (log p_j - log q_j), a term with p_j = 0 counting 0
 *     (KLDivLoss's "batchmean"; tau_s^2 keeps the gradient's size as the temperature changes).
 * With `contrastive` set the loss is contrastive + weight * distillation, the in-batch
 * InfoNCE loss over the same representations (its options, positives 1) as the trainer's
 * --distill-weight adds it. The teacher's scores are constants: read to the host in f64 once
 * per call (1 + k numbers per query) and turned into the teacher's margins or probabilities
 * there, so f16 and bf16 students still see the teacher's f64 targets rounded once. */
typedef enum gc_distill_kind { GC_DISTILL_MARGIN_MSE, GC_DISTILL_KL_DIV } gc_distill_kind;

typedef struct gc_distill_options {
    gc_distill_kind kind;
    gc_similarity similarity;                 /* the student's scores */
    const gc_tensor *teacher_scores;          /* [Nq, 1 + k], any float dtype, on any device: read
                                                 at each call (the caller sets each batch's) */
    double student_temperature;               /* KL: tau_s (> 0, finite); MarginMSE: unused */
    double teacher_temperature;               /* KL: tau_t (> 0, finite); MarginMSE: unused */
    double weight;                            /* the distillation term's weight (finite) */
    const gc_contrastive_options *contrastive; /* NULL: the distillation term alone */
} gc_distill_options;

/* The loss over queries [Nq, D] and passages [Nq (1 + k), D] (recorded, so autograd
 * differentiates it): a 0-dim tensor of the working dtype (f32 for f16 and bf16 inputs).
 * Shapes that do not fit the teacher's scores stop the program naming them. */
gc_tensor *gc_distill_loss(const gc_tensor *queries, const gc_tensor *passages, const gc_distill_options *options);
/* Its value and seed times its gradients (new tensors of the inputs' shapes and dtypes): the
 * distillation term by autograd on detached copies (it holds only [Nq, 1 + k] scores), the
 * contrastive term as gc_contrastive_value_and_grad computes it (tiled where that saves
 * memory). Errors as gc_contrastive_value_and_grad's. */
gc_status gc_distill_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_distill_options *options, double seed, double *value,
                                    gc_tensor **grad_queries, gc_tensor **grad_passages);
/* The same loss over the global batch of a process group, without gathering it: queries [nq, D],
 * passages [nq (1 + k), D] and options->teacher_scores [nq, 1 + k] are this rank's (nq may
 * differ per rank, zero included). The distillation term has no term across ranks (each query
 * is scored against its own candidates only): each rank computes its own queries' terms,
 * weighted by its share of the global queries, and the values are summed over the ranks (two
 * all-reduces of one number); the contrastive term, when set, runs around the ring
 * (gc_contrastive_loss_ring: its options, checks and errors). *value is the global loss, the
 * same on every rank; the gradients are seed times d loss / d this rank's rows. A loss that is
 * not finite (or a rank's failure before the sum, a teacher score that is not finite say) is an
 * error on every rank: GC_ERR_NON_FINITE, or the failed rank's own. */
gc_status gc_distill_loss_group(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                const gc_distill_options *options, double seed, double *value,
                                gc_tensor **grad_queries, gc_tensor **grad_passages);
/* A gc_loss_fn for it over (queries, passages); options kept by pointer and read at each call.
 * Its group_value_and_grad is gc_distill_loss_group: the teacher's scores must be this rank's
 * rows for it (gc_cache_config.global_loss RING), the global batch's for the gathered loss. */
gc_loss_fn gc_distill_loss_fn(const gc_distill_options *options);

#ifdef __cplusplus
}
#endif
#endif
