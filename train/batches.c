/* The training batches (see gradcache/train.h): which examples a step takes, and their
 * tokenized tensors. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/random.h"
#include "gradcache/train.h"

void gc_epoch_order(uint64_t seed, int64_t epoch, int64_t count, int64_t *order) {
    for (int64_t i = 0; i < count; i++) order[i] = i;
    uint64_t word = 2 * (uint64_t)epoch * (uint64_t)count;
    /* Fisher-Yates. Two words make a 64-bit draw, so the bias of the modulo (at most
     * count / 2^64) is far below anything a run could notice. */
    for (int64_t i = count - 1; i > 0; i--, word += 2) {
        uint64_t draw = (uint64_t)gc_philox_word(seed, word) << 32 | gc_philox_word(seed, word + 1);
        int64_t j = (int64_t)(draw % (uint64_t)(i + 1));
        int64_t swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
}

void gc_batch_sampler_init(gc_batch_sampler *sampler, uint64_t seed, int64_t count, int64_t batch_size) {
    if (batch_size < 1 || batch_size > count)
        gc_fatal("batch_sampler_init: a batch of %lld from %lld examples", (long long)batch_size, (long long)count);
    *sampler = (gc_batch_sampler){.seed = seed,
                                  .count = count,
                                  .batch_size = batch_size,
                                  .steps_per_epoch = count / batch_size,
                                  .epoch = -1};
}

void gc_batch_sampler_locate(const gc_batch_sampler *sampler, int64_t step, int64_t *epoch, int64_t *position) {
    *epoch = step / sampler->steps_per_epoch;
    *position = step % sampler->steps_per_epoch * sampler->batch_size;
}

const int64_t *gc_batch_sampler_batch(gc_batch_sampler *sampler, int64_t step, int64_t *epoch) {
    int64_t position;
    gc_batch_sampler_locate(sampler, step, epoch, &position);
    if (!sampler->order) {
        sampler->order = malloc((size_t)sampler->count * sizeof *sampler->order);
        if (!sampler->order) gc_fatal("batch_sampler: out of host memory for the data order");
    }
    if (*epoch != sampler->epoch) { /* a new epoch (or a resumed run's first): its order */
        gc_epoch_order(sampler->seed, *epoch, sampler->count, sampler->order);
        if (sampler->keys)
            sampler->repeated = gc_batch_order_distinct(sampler->order, sampler->count, sampler->batch_size,
                                                        sampler->keys, sampler->keys_per_example, sampler->n_keys);
        sampler->epoch = *epoch;
    }
    return sampler->order + position;
}

void gc_batch_sampler_distinct(gc_batch_sampler *sampler, const int64_t *keys, int per_example, int64_t n_keys) {
    size_t size = (size_t)(sampler->count * per_example) * sizeof *keys;
    if (per_example < 1) gc_fatal("batch_sampler_distinct: %d keys per example", per_example);
    for (int64_t i = 0; i < sampler->count * per_example; i++)
        if (keys[i] < 0 || keys[i] >= n_keys)
            gc_fatal("batch_sampler_distinct: key %lld of entry %lld is outside [0, %lld)", (long long)keys[i],
                     (long long)i, (long long)n_keys);
    free(sampler->keys);
    sampler->keys = malloc(size);
    if (!sampler->keys) gc_fatal("batch_sampler_distinct: out of host memory for %zu bytes of keys", size);
    memcpy(sampler->keys, keys, size);
    sampler->keys_per_example = per_example;
    sampler->n_keys = n_keys;
    sampler->epoch = -1; /* the order is rearranged from now on */
}

void gc_batch_sampler_free(gc_batch_sampler *sampler) {
    free(sampler->keys);
    free(sampler->order);
    *sampler = (gc_batch_sampler){0};
}

/* The texts of column `first` and the `columns - 1` after it, for each example in turn. */
static const char **gather_texts(const gc_pairs *pairs, const int64_t *examples, int64_t count, int first,
                                 int columns) {
    const char **texts = malloc((size_t)(count * columns) * sizeof *texts);
    if (!texts) gc_fatal("training_batch: out of host memory for %lld texts", (long long)(count * columns));
    for (int64_t e = 0; e < count; e++)
        for (int c = 0; c < columns; c++) texts[e * columns + c] = gc_pairs_text(pairs, examples[e], first + c);
    return texts;
}

gc_status gc_training_batch_make(const gc_pairs *pairs, const int64_t *examples, int64_t count, int negatives,
                                 const gc_tokenizer *tokenizer, char *const prompts[2], int64_t max_length,
                                 gc_dtype mask_dtype, gc_device device, gc_training_batch *batch) {
    *batch = (gc_training_batch){0};
    if (negatives < 0 || negatives > pairs->negatives)
        gc_fatal("training_batch: %d negatives asked, the pairs have %d", negatives, pairs->negatives);
    /* column 0 is the query, 1 the positive, 2.. the negatives */
    const char **queries = gather_texts(pairs, examples, count, 0, 1);
    const char **passages = gather_texts(pairs, examples, count, 1, 1 + negatives);
    gc_status status = gc_tokenize_prompted(tokenizer, prompts ? prompts[0] : NULL, queries, count, max_length,
                                            GC_PAD_TO_LONGEST, mask_dtype, device, &batch->query_ids,
                                            &batch->query_mask);
    if (status == GC_OK)
        status = gc_tokenize_prompted(tokenizer, prompts ? prompts[1] : NULL, passages, count * (1 + negatives),
                                      max_length, GC_PAD_TO_LONGEST, mask_dtype, device, &batch->passage_ids,
                                      &batch->passage_mask);
    free(queries);
    free(passages);
    if (status != GC_OK) {
        gc_training_batch_release(batch);
        return status;
    }
    batch->inputs[0] = (gc_batch){2, {"ids", "mask"}, {batch->query_ids, batch->query_mask}};
    batch->inputs[1] = (gc_batch){2, {"ids", "mask"}, {batch->passage_ids, batch->passage_mask}};
    return GC_OK;
}

void gc_training_batch_release(gc_training_batch *batch) {
    gc_tensor_release(batch->query_ids);
    gc_tensor_release(batch->query_mask);
    gc_tensor_release(batch->passage_ids);
    gc_tensor_release(batch->passage_mask);
    *batch = (gc_training_batch){0};
}
