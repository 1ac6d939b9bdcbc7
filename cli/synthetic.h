/* Synthetic token batches for the commands that need no dataset (verify, bench): random
 * texts of random lengths, tokenised like real ones, so that padding and the mask are
 * exercised as in training. */
#ifndef GC_CLI_SYNTHETIC_H
#define GC_CLI_SYNTHETIC_H

#include "gradcache/rng.h"
#include "gradcache/tensor.h"

/* rows random texts -> ids i32 [rows, max_length] and mask [rows, max_length] (mask_dtype)
 * on `device`, as gc_tokenize makes them: [CLS], then 0 to max_length - 1 random bytes (ids
 * in [GC_TOKEN_FIRST_BYTE + 1, GC_TOKEN_VOCAB)), then padding. The random numbers come from
 * `generator` (advanced past them), so a (seed, offset) names a batch. GC_OK, or the
 * allocation error with nothing left allocated. */
gc_status gc_synthetic_tokens(int64_t rows, int64_t max_length, gc_dtype mask_dtype, gc_device device,
                              gc_generator *generator, gc_tensor **ids, gc_tensor **mask);

#endif
