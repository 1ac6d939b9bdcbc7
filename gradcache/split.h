/* Batches and chunks, shared by the cache's files. */
#ifndef GC_GRADCACHE_SPLIT_H
#define GC_GRADCACHE_SPLIT_H

#include "gradcache/cache.h"

/* Rows of a batch (dim 0 of every tensor; a mismatch is a programmer error). */
int64_t gc_batch_rows(const gc_batch *batch);
/* ceil(rows / chunk_size). */
int gc_chunk_count(int64_t rows, int64_t chunk_size);
/* The default gc_split_fn. */
int gc_split_by_rows(const gc_batch *input, int64_t chunk_size, gc_batch *chunks, int capacity, void *user);
/* The batch's tensor `name`, which must be a mask [rows, T] (else a programmer error naming `op`). */
const gc_tensor *gc_batch_mask(const char *op, const gc_batch *batch, const char *name);
/* Each row's real tokens: mask [rows, T] summed over T, read to the host (a synchronisation on a
 * GPU); a new array [rows] for the caller to free, or NULL on a recoverable error. */
int64_t *gc_row_tokens(const gc_tensor *mask);
/* A model input in the order the cache splits it (gc_cache_config.sort_by): by its rows' real
 * tokens, longest first, or as it comes. */
typedef struct gc_row_order {
    int64_t *order;   /* [rows]: the chunks' row i is the batch's row order[i]; NULL: the batch's order */
    int64_t *inverse; /* [rows]: the batch's row j is the chunks' row inverse[j]; NULL when order is */
    gc_batch batch;   /* the input in that order (new references) */
} gc_row_order;
/* The rows of `input` by the real tokens of its mask named `mask` (gc_batch_mask), longest first
 * and ties in batch order; mask NULL: as they come. Returns GC_OK, or a recoverable error with
 * nothing to release. */
gc_status gc_row_order_begin(const gc_batch *input, const char *mask, gc_row_order *order);
/* x [rows, ...] in the chunks' order put in the batch's (a new reference, with a graph when grad
 * mode is on and x requires a gradient), or x itself (retained) without an order; NULL on a
 * recoverable error. */
gc_tensor *gc_row_order_to_batch(const gc_row_order *order, gc_tensor *x);
/* x [rows, ...] in the batch's order put in the chunks', as gc_row_order_to_batch. */
gc_tensor *gc_row_order_to_chunks(const gc_row_order *order, gc_tensor *x);
void gc_row_order_end(gc_row_order *order);
/* Releases the batch's tensors (a chunk's, which the cache owns). */
void gc_batch_release(gc_batch *batch);

#endif
