/* The ring contrastive loss (gc_contrastive_loss_ring), between its two files:
 * contrastive_ring.c sets up (the ranks' shapes, the checks, this rank's sides and the
 * buffers the blocks travel in) and contrastive_ring_passes.c runs the passes around the ring.
 *
 * A block is one rank's passages as they travel: their rows and the vectors the tiles need
 * of them. The ranks' blocks differ in rows, so what arrives is written into the front of a
 * buffer sized for the largest block, and used as views of it. */
#ifndef GC_NN_CONTRASTIVE_RING_H
#define GC_NN_CONTRASTIVE_RING_H

#include "contrastive_tiles.h"

/* The vectors of a block, rows of one [RING_VECTORS, n] tensor so that they travel as one:
 * the scale b (the forward needs only it), then, symmetric, w n_j and the completed column
 * log-sum-exp lse'. */
enum { RING_SCALE, RING_WEIGHT, RING_LSE, RING_VECTORS };

typedef struct ring_block {
    gc_tensor *reps;    /* [n, D] working precision */
    gc_tensor *vectors; /* [k, n]: the first k rows of the block's vectors */
    gc_tensor *guide;   /* GIST: [n, Dg], the guide's unit rows of the block; NULL otherwise */
} ring_block;

typedef struct ring_gist ring_gist;

/* Which of a query's k positives a pass of the ring scores (the several-positive loss is the
 * mean of k one-positive passes, multi_positive.c): under the default targets, global query
 * i's positive is global passage i (Np / Nq) + column. The ranks check that they agree on k,
 * the passes every one of them makes. {0, 1}: the one-positive loss. */
typedef struct ring_target {
    int64_t column, positives;
} ring_target;

typedef struct ring_loss {
    gc_process_group *group;
    const gc_contrastive_options *options;
    ring_gist *gist;                        /* the guided loss's part (gist_ring.c); NULL: the contrastive loss */
    ring_target target;                     /* the positive this pass scores */
    int rank, world;
    /* the global batch, the same on every rank */
    int64_t *passage_count, *passage_start; /* [world]: each rank's passages and the first one's global index */
    int64_t *query_starts;                  /* [world]: each rank's first query's global index */
    int64_t *block_rows;                    /* [world]: the rows of each rank's block: its passages (GIST: then
                                               its queries and its queries' positives) */
    int64_t query_start;                    /* this rank's first query's global index */
    int64_t total_queries, total_passages, largest_block, dim, guide_dim;
    int n_vectors;                          /* rows of a block's vectors: 1, or RING_VECTORS when symmetric */
    /* this rank */
    gc_loss_side queries;     /* the rows of every tile; targets are global passage indices */
    gc_loss_side passages;    /* this rank's block; grad: its complete gradient, after the backward (a
                                 view of the grads buffer where it arrived) */
    gc_tensor *own_vectors;   /* [n_vectors, np] */
    gc_tensor *own_counts;    /* symmetric: [np], n_j */
    gc_loss_tiles tiles;
    /* flat buffers that blocks arrive in, each sized for the largest block */
    gc_tensor *reps_in[2];    /* [largest * D] */
    gc_tensor *vectors_in[2]; /* [n_vectors * largest] */
    gc_tensor *stats[2];      /* symmetric: [2 * largest], a block's partial column (max | sum) */
    gc_tensor *grads[2];      /* [largest * D]: the held block's gradient, and the next one's arriving */
    gc_tensor *guide_in[2];   /* GIST: [largest * Dg] */
    double seed;
} ring_loss;

/* [rows, cols] over the front of the flat tensor (a new view). */
gc_tensor *gc_ring_front(const gc_tensor *flat, int64_t rows, int64_t cols);
/* Row i of t [k, n] as a vector [n] (a new view). */
gc_tensor *gc_ring_row(const gc_tensor *t, int64_t i);

/* contrastive_ring_passes.c. The forward: every block once around the ring, folded into the
 * queries' running log-sum-exps and (symmetric) its own column sums, which follow it from
 * rank to rank and end at its owner, who completes lse'. */
gc_status gc_ring_forward(ring_loss *loss);
/* The global loss from the completed log-sum-exps: one all-reduce. */
gc_status gc_ring_value(ring_loss *loss, double *value);
/* The gradient: every block around the ring again, the queries' gradient summed here, each
 * block's gradient summed along the way behind it, to end at its owner (passages.grad). */
gc_status gc_ring_backward(ring_loss *loss);

/* The ring with `gist` (NULL: the contrastive loss) for both losses' entry points, scoring
 * `target`'s positive: the shapes exchanged, then everything under no-grad; the gradients of
 * this rank's rows. The caller has checked its options (one positive: options->targets, when
 * given, are [global Nq]). */
gc_status gc_ring_loss_run(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                           const gc_contrastive_options *options, ring_gist *gist, ring_target target, double seed,
                           double *value, gc_tensor **grad_queries, gc_tensor **grad_passages);

/* gist_ring.c, the guided loss's part. Sets up what the ring needs before the shapes travel:
 * the guide's Dg and the tiles' mask. */
void gc_ring_gist_attach(ring_loss *loss);
/* This rank's block [np + 2 nq, D]: its passages, queries
 * and queries' positives (a new tensor), with its guide rows and the rows side of block 2. */
gc_status gc_ring_gist_prepare(ring_loss *loss, const gc_tensor *queries, const gc_tensor *passages,
                               gc_tensor **block);
/* The guide's unit rows of this rank's block [np + 2 nq, Dg] (borrowed). */
gc_tensor *gc_ring_gist_own_guide(const ring_loss *loss);
/* Folds (forward) or differentiates the tiles of this rank's rows against the block of rank
 * `owner`, whose columns are `cols` and guide rows `guide`: its passages, queries and positives
 * each against the rows of their logits' block, masked by the guide. */
void gc_ring_gist_visit(ring_loss *loss, const gc_loss_side *cols, const gc_tensor *guide, int owner,
                        bool differentiate);
/* The first mask allocation error of the visits (GC_OK: none). */
gc_status gc_ring_gist_status(const ring_loss *loss);
/* After the normalisation backward: the gradients of this rank's queries and passages from
 * its rows' and its block's (the queries' and positives' rows of the block folded back, each
 * positive's into its passage). New tensors, in working precision. */
gc_status gc_ring_gist_gradients(ring_loss *loss, gc_tensor **grad_queries, gc_tensor **grad_passages);

#endif
