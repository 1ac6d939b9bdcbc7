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
/* Releases the batch's tensors (a chunk's, which the cache owns). */
void gc_batch_release(gc_batch *batch);

#endif
