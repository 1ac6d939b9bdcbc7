/* The training batches: which examples each step sees, and their tokenized tensors.
 *
 * Epoch e visits the examples in a permutation drawn from the Philox stream of `seed`
 * (gradcache/random.h), from word 2 e n on, so the order of any epoch follows from (seed, e)
 * alone: a resumed run needs only the step count to know where it is. Step s of an epoch
 * takes positions [s B, (s + 1) B) of the permutation; the n mod B examples left over at
 * the end of an epoch are skipped in that epoch (every batch has B examples). */
#ifndef GC_CLI_BATCHES_H
#define GC_CLI_BATCHES_H

#include "gradcache/gradcache.h"
#include "pairs.h"

/* order[0..count): a permutation of 0..count-1, the order of `epoch`. */
void gc_epoch_order(uint64_t seed, int64_t epoch, int64_t count, int64_t *order);

/* The two inputs of a step: the queries, and the passages (each example's positive followed
 * by its first `negatives` negatives, the layout gc_contrastive_loss expects). */
typedef struct gc_training_batch {
    gc_tensor *query_ids, *query_mask;     /* [B, T <= max_length] */
    gc_tensor *passage_ids, *passage_mask; /* [B (1 + negatives), T' <= max_length] */
    gc_batch inputs[2];                    /* {ids, mask} of each side, borrowing the above */
} gc_training_batch;

/* Tokenizes examples[0..count) of `pairs` on `device`, at most max_length tokens per text,
 * each side padded to its longest text, the masks in mask_dtype (the model's). Returns GC_OK
 * or an allocation error (nothing left allocated). */
gc_status gc_training_batch_make(const gc_pairs *pairs, const int64_t *examples, int64_t count, int negatives,
                                 const gc_tokenizer *tokenizer, int64_t max_length, gc_dtype mask_dtype,
                                 gc_device device, gc_training_batch *batch);
void gc_training_batch_release(gc_training_batch *batch);

#endif
