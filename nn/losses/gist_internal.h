/* What the untiled GIST loss (gist.c) and the tiled one (gist_tiled.c) share: the checks and
 * the guide's masks (gist_mask.c). */
#ifndef GC_NN_GIST_INTERNAL_H
#define GC_NN_GIST_INTERNAL_H

#include "contrastive_internal.h"

/* Stops the program (one line) on options no call could make sense of. */
void gc_gist_check_options(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options);
/* Its part beyond the contrastive loss's checks: one positive, one direction, the guide's rows
 * (as many as the student's), the margin. */
void gc_gist_check_guide(const gc_tensor *queries, const gc_tensor *passages, const gc_gist_options *options);

/* The guide's side of the loss: its unit rows and each query's threshold. The three blocks of
 * the logits are (queries, passages), (queries, queries) and (positives, positives). */
typedef struct gc_gist_guide {
    gc_tensor *queries;   /* [Nq, Dg] unit rows */
    gc_tensor *passages;  /* [Np, Dg] unit rows */
    gc_tensor *positives; /* [Nq, Dg]: passages[targets] */
    gc_tensor *threshold; /* [Nq, 1]: g(q_i, p_t_i) less the margin */
    gc_tensor *targets;   /* i32 [Nq] (retained) */
    gc_dtype dtype;       /* the student's working dtype, the masks' */
    /* the columns of each block, borrowed: passages, queries, positives -- or, around the ring,
     * the rows of the block that travels -- and the index among the targets of block 0's
     * column 0 (0; around the ring, the block's first global passage) */
    const gc_tensor *columns[3];
    int64_t column_offset;
} gc_gist_guide;

/* The guide of one call (recording nothing); GC_OK or an allocation error (then release). */
gc_status gc_gist_guide_init(gc_gist_guide *guide, const gc_gist_options *options, const gc_tensor *targets,
                             gc_dtype dtype);
void gc_gist_guide_release(gc_gist_guide *guide);

/* The bias of block b (0, 1 or 2) over its rows [row, row + rows) and columns
 * [col, col + cols) of guide->columns[b]: -inf where the guide's score exceeds the row's threshold (never at the
 * row's positive, in block 0), 0 elsewhere; of the guide's dtype `dtype`. Records nothing. */
gc_tensor *gc_gist_mask(const gc_gist_guide *guide, int block, int64_t row, int64_t rows, int64_t col, int64_t cols);

#endif
