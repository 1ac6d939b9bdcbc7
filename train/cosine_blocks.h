/* Cosine scores a block of queries at a time: what retrieval evaluation and exact search both
 * rank by, with host memory bounded by the block whatever the number of queries. */
#ifndef GC_TRAIN_COSINE_BLOCKS_H
#define GC_TRAIN_COSINE_BLOCKS_H

#include "gradcache/tensor.h"

/* Query rows per block: the host's scores are [GC_COSINE_QUERY_BLOCK, Nc] floats at most. */
enum { GC_COSINE_QUERY_BLOCK = 1024 };

/* The scores of query rows [start, start + rows), [rows, Nc] on the host; an error stops. */
typedef gc_status (*gc_cosine_visit)(void *user, const float *scores, int64_t start, int64_t rows);

/* Unit rows of queries [Nq, D] and candidates [Nc, D] (f32, one device; gc_l2_normalize with
 * eps 1e-12, as the contrastive loss's cosine: only a zero row changes), multiplied a block of
 * queries at a time, each block's scores handed to visit. GC_OK, the first error of visit, or
 * an allocation error. */
gc_status gc_cosine_score_blocks(const gc_tensor *queries, const gc_tensor *candidates, gc_cosine_visit visit,
                                 void *user);

#endif
