/* Gradient Cache: contrastive training with a batch far larger than memory allows.
 *
 * One step (gc_cache_step) over a batch for each of N models:
 *   1. each model's input is split into chunks (views along dim 0, no copy; with sort_by its
 *      rows sorted by length first, a copy);
 *   2. for each chunk: capture the RNG context of every device, run the model without a
 *      graph, keep only the representation;
 *   3. concatenate each model's representations, make them leaves, compute the loss on
 *      them and back-propagate to get d loss / d representation: the cache (times the loss
 *      scale, when a loss scaler is configured: see below);
 *   4. for each model and chunk: replay the chunk's RNG context, run the model again with a
 *      graph, and back-propagate that chunk's slice of the cache (a vector-Jacobian product,
 *      gc_backward seeded with it) into the parameters;
 *   5. return the loss. The optimizer step is the caller's.
 * The parameter gradients equal those of one step over the whole batch; memory holds one
 * chunk's graph at a time plus the representations and their gradients; the cost is one
 * extra forward pass per chunk (one fewer per model with keep_last_graph).
 *
 * Models are called through a function over an opaque state, so any model works: a
 * gc_text_encoder, an MLP made of ops, two towers or the same one twice (tied encoders:
 * pass the same state twice; gradients accumulate into the shared parameters).
 *
 * Half precision: a model's dtype is its parameters', so the second pass computes in the
 * precision of the first (a representation that comes back in another dtype or shape is a
 * programmer error naming the model and the chunk) and, replaying the RNG, with the same
 * dropout masks. With f16 gradients, set config.scaler (gradcache/loss_scaler.h): the loss's
 * backward is seeded with the scale once, when the cache is built, so the cache and every
 * chunk's gradients carry that one scale for the whole step; an overflow in any chunk reaches
 * the accumulated parameter gradients as an inf or a nan (they are sums), so the scaler's
 * check after the step skips the whole step. bf16 needs no scaler.
 *
 * Data-parallel (include/gradcache/dist.h, ddp.h): each rank gives its own part of the
 * global batch. With a process group, step 3's loss is over the global batch, seen one of two
 * ways (config.global_loss): every model's representations all-gathered over the ranks
 * (unequal rows per rank allowed), every rank computing the same loss and keeping the slice
 * of the cache for its own rows; or, for a loss that offers one (the contrastive loss's ring,
 * gc_loss_fn.group_value_and_grad), the loss run around the ranks on each rank's own rows,
 * which returns their gradients directly -- nothing is gathered, and a rank holds its own
 * representations, not the global batch's. Either way the cache is scaled by the world
 * size, so that averaging the parameter gradients over the ranks gives exactly the gradient
 * of the global loss (what one process would get over the whole global batch). With a
 * bucketer, sync is suppressed for every backward of step 4 but the very last, which is
 * followed by gc_ddp_wait: one all-reduce per bucket per step, however many chunks and
 * models (tied ones included) there are. */
#ifndef GRADCACHE_CACHE_H
#define GRADCACHE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/ddp.h"
#include "gradcache/dist.h"
#include "gradcache/loss.h"
#include "gradcache/loss_scaler.h"
#include "gradcache/nn.h"
#include "gradcache/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GC_CACHE_MAX_MODELS 8
#define GC_BATCH_MAX_TENSORS 8

/* A model's input: named tensors whose dim 0 is the batch (ids [B, T], mask [B, T], ...). */
typedef struct gc_batch {
    int count;
    const char *names[GC_BATCH_MAX_TENSORS];
    gc_tensor *tensors[GC_BATCH_MAX_TENSORS]; /* borrowed: the caller keeps them alive */
} gc_batch;

/* The output of `model` for one chunk (a new reference; NULL on a recoverable error). */
typedef gc_tensor *(*gc_model_fn)(void *model, const gc_batch *chunk);
/* Picks the representation [rows, D] out of a model's output (a new reference). */
typedef gc_tensor *(*gc_representation_fn)(gc_tensor *output, void *user);
/* Splits `input` into chunks of at most chunk_size rows, writing up to `capacity` batches
 * whose tensors are new references (released by the cache); returns how many, or -1 on a
 * recoverable error. The default splits every tensor along dim 0 with views. */
typedef int (*gc_split_fn)(const gc_batch *input, int64_t chunk_size, gc_batch *chunks, int capacity, void *user);

/* Chunks by token budget (sentence-transformers' mini_batch_num_tokens): a gc_split_fn whose
 * `user` is a gc_token_budget. A chunk is consecutive rows whose real tokens (the sums of the
 * batch tensor named `mask`, [rows, T], padded on the right as gc_tokenize pads) add up to at
 * most max_tokens (a longer row makes a chunk alone), at most chunk_size rows; every [rows, T]
 * tensor of a chunk is cut to its longest row (a copy), so a chunk of short texts computes none
 * of the padding its batch's longest text put there. The mask is read to the host once per
 * split (a synchronisation on a GPU). */
typedef struct gc_token_budget {
    int64_t max_tokens; /* >= 1 */
    const char *mask;   /* the name of the batch's mask, e.g. "mask" */
} gc_token_budget;
int gc_split_by_tokens(const gc_batch *input, int64_t chunk_size, gc_batch *chunks, int capacity, void *user);
/* Runs the backward of `output` seeded with `seed` (an outer trainer's own backward); the
 * default is gc_backward. It must back-propagate the seed as given: the cache applies the
 * loss scale itself, once, in the seeds it passes (the loss's seed is the scale as a tensor
 * like the loss, or NULL for 1 without a scaler; a chunk's is its slice of the already scaled
 * cache), so a backward that scaled again would scale twice. */
typedef gc_status (*gc_backward_fn)(gc_tensor *output, gc_tensor *seed, void *user);

typedef struct gc_cached_model {
    void *state;
    gc_model_fn forward;
    int64_t chunk_size;          /* rows per chunk (> 0); the last chunk may be smaller */
    const gc_param_list *params; /* its parameters: needed by gc_cache_verify and by the
                                    automatic chunk size; may be NULL otherwise */
} gc_cached_model;

/* How step 3's loss sees the global batch across processes (gc_cache_config.global_loss). */
typedef enum gc_global_loss {
    GC_GLOBAL_LOSS_AUTO,   /* the ring when the loss offers one and the gathered representations and
                              their gradients would take more than ring_share of the memory limit of
                              their device (gc_memory_set_limit; the device's memory without one) on
                              any rank; else the gather */
    GC_GLOBAL_LOSS_GATHER, /* every rank's representations all-gathered; every rank computes the loss
                              over them and keeps its own rows of the gradients */
    GC_GLOBAL_LOSS_RING    /* the loss's own ring over each rank's rows (loss.group_value_and_grad,
                              which must be set): nothing is gathered */
} gc_global_loss;

/* GC_GLOBAL_LOSS_AUTO's share of the memory limit: the gathered representations and their
 * gradients may take a quarter of it, the rest being the models' (parameters, gradients,
 * optimizer state, one chunk's activations) and the loss's working memory. */
#define GC_CACHE_RING_SHARE 0.25

typedef struct gc_cache_config {
    int n_models;
    gc_cached_model models[GC_CACHE_MAX_MODELS];
    gc_loss_fn loss;                       /* over the n_models representations */
    gc_representation_fn representation;   /* NULL: the model output is the representation */
    gc_split_fn split;                     /* NULL: split every tensor along dim 0 (chunk_size
                                              rows each); a split may make up to one chunk per row */
    const char *sort_by;                   /* NULL: each model's rows are split in the batch's order;
                                              else the name of a mask [rows, T] in every input:
                                              each model's rows are split sorted by their real
                                              tokens (the mask's row sums), longest first (equal
                                              ones in batch order), so a chunk holds texts of
                                              similar lengths and a split that cuts each chunk to
                                              its longest (gc_split_by_tokens) cuts nearly all the
                                              padding; the representations go to the loss, and
                                              the cache comes back, in the batch's order, so the
                                              step's gradients are the whole batch's */
    gc_backward_fn backward;               /* NULL: gc_backward */
    void *user;                            /* passed to representation, split and backward */
    bool keep_last_graph;                  /* keep the last chunk's graph from the first pass
                                              instead of recomputing it */
    bool auto_chunk;                       /* on out-of-memory or the memory limit, halve the
                                              chunk sizes and retry (see gc_cache_step) */
    const gc_loss_scaler *scaler;          /* NULL: no loss scaling; else the loss is scaled by
                                              scaler->scale, read when each step builds its cache
                                              (the plain step too); checking the gradients and
                                              updating the scaler are the caller's */
    gc_process_group *group;               /* NULL: one process; else the loss sees every
                                              rank's representations (see the top) */
    gc_global_loss global_loss;            /* with a group: gathered, around the ring, or chosen
                                              per step by the memory it would take (AUTO, 0) */
    double ring_share;                     /* AUTO's share of the memory limit (0:
                                              GC_CACHE_RING_SHARE); every rank must give the same */
    gc_ddp *ddp;                           /* NULL: none; else one reduction per step */
    bool sync_every_backward;              /* with ddp: reduce after every chunk's backward
                                              instead (what suppression saves, measured); a
                                              bucketer at GC_ZERO_2_EVERY_BACKWARD does so
                                              whatever this says. A rank with fewer chunks of
                                              a model than another takes part in the rest of
                                              its reductions with empty contributions */
} gc_cache_config;

/* Time (seconds) and peak live bytes (on the representations' device) of each phase. */
typedef struct gc_cache_report {
    double forward_seconds, loss_seconds, backward_seconds;
    size_t forward_peak_bytes, loss_peak_bytes, backward_peak_bytes;
    size_t cache_bytes;           /* representations + their gradients */
    int64_t chunk_sizes[GC_CACHE_MAX_MODELS]; /* the sizes used (after any automatic halving) */
    int retries;                  /* automatic chunk sizing: attempts that ran out of memory */
    double loss_scale;            /* the scale the step's gradients carry (1 without a scaler) */
    bool ring_loss;               /* the loss ran around the ring: no representation was gathered */
} gc_cache_report;

typedef struct gc_cache gc_cache;

gc_cache *gc_cache_new(const gc_cache_config *config);
void gc_cache_free(gc_cache *cache);

/* One step over inputs[0..n_models). Writes the loss into *loss and, when report is not
 * NULL, the step's report (measuring it resets the peak-memory counter of the
 * representations' device at each phase). Returns GC_OK, or a recoverable error (out of memory, memory
 * limit) with everything the step allocated released; the parameters' gradients may then
 * hold a partial sum.
 * With auto_chunk, such an error makes the step zero the gradients of every model's params
 * (config.models[i].params must be set), halve every chunk size and retry, down to chunks of
 * one row; the sizes that worked are kept for the following steps. Start such a step with
 * zeroed gradients (the usual optimizer loop). Every attempt starts from the RNG state the
 * step started with, so a retried step draws the dropout masks a first attempt would have.
 * With a process group every rank retries when any ran out of memory (they share how an
 * attempt went after the graph-less forwards, after the loss and after the backwards; a rank
 * that failed still takes part in the reductions, and the gathered loss agrees before it
 * gathers), so all keep one chunk size: the largest halving that fits on every rank. A loss
 * around the ring is retried when the refusal comes as it makes its buffers; one inside its
 * passes stops the step on every rank at the timeout. */
gc_status gc_cache_step(gc_cache *cache, const gc_batch *inputs, double *loss, gc_cache_report *report);

/* The verify mode: runs the GradCache step, then the same step as one plain full-batch
 * forward + backward, and compares every parameter's gradient. max_relative receives the
 * largest ||g_cache - g_full|| / max(||g_full||, floor) over parameters; per_param (may be
 * NULL) receives each parameter's value in the order of the models' param lists (tied
 * models counted once). Both steps start from the same RNG state, so they draw the same
 * dropout masks. The parameters are left holding the full-batch gradients. */
gc_status gc_cache_verify(gc_cache *cache, const gc_batch *inputs, double floor, double *max_relative,
                          double *per_param, int per_param_capacity);

/* The plain step, for comparisons: each model's whole batch in one graph, the loss on
 * their representations (all-gathered with a group), and one backward per model seeded with
 * the loss's gradient (synced on the last, with a bucketer). The forwards run chunk by chunk
 * as in the cached step and in its order (with chunk size = batch size it is one forward), so
 * dropout draws the same masks and the gradients of the two steps agree to rounding for any
 * model whose rows do not interact (every encoder here). */
gc_status gc_cache_full_batch_step(gc_cache *cache, const gc_batch *inputs, double *loss);

/* --- the functional API, for loaders that emit small batches ---
 * gc_cached_forward runs a model on one small batch without a graph after capturing the RNG
 * state of every device, and returns the representation as a leaf that requires a gradient
 * (use the leaves in the loss, e.g. concatenated) and a closure. After the loss's backward
 * has filled the leaves' gradients, gc_closure_run replays the RNG, runs the model with a
 * graph and back-propagates the leaf's gradient into the parameters. With a loss scaler, seed
 * the loss's backward with the scale: the closures carry it on as it is. */
typedef struct gc_closure gc_closure;
gc_tensor *gc_cached_forward(void *model, gc_model_fn forward, const gc_batch *input,
                             gc_representation_fn representation, void *user, gc_closure **closure);
gc_status gc_closure_run(gc_closure *closure, const gc_tensor *representation_leaf);
/* The same, seeded with `grad` (d loss / d representation, the representation's shape). */
gc_status gc_closure_run_seeded(gc_closure *closure, const gc_tensor *grad);
void gc_closure_free(gc_closure *closure);

/* --- the functional API under data parallelism (docs/DESIGN.md, examples/09_functional_ddp.c) ---
 * gc_functional_loss: the loss over reps[i] [rows_i, D] (each model's representations of this
 * rank, e.g. its small batches' leaves concatenated) and grads[i], new tensors of reps[i]'s
 * shape: d loss / d reps[i] times the scaler's scale (NULL: 1). With a group, as gc_cache_step's
 * loss: every rank's reps all-gathered (unequal rows allowed), the loss over the global batch,
 * and each rank's gradient its own rows' scaled by the world size, so that the bucketer's average
 * is exactly the global loss's gradient. *value: the loss. */
gc_status gc_functional_loss(const gc_loss_fn *loss, gc_process_group *group, const gc_loss_scaler *scaler,
                             gc_tensor *const *reps, int count, double *value, gc_tensor **grads);
/* Runs closures[i] seeded with grads[i], i < n, in order; with a bucketer (ddp, else NULL) the
 * sync is suppressed for every backward but the last (gc_ddp_micro_batch), which is followed by
 * gc_ddp_wait: one all-reduce per bucket for all of them. A failure stops the run; with a
 * bucketer the remaining ranks' collectives are then unmatched: a failed step ends the run. */
gc_status gc_closures_run(gc_closure *const *closures, gc_tensor *const *grads, int n, gc_ddp *ddp);

#ifdef __cplusplus
}
#endif
#endif
