/* Duplicate-free batches (gc_batch_sampler_distinct, gradcache/train.h): an epoch's order
 * rearranged so that no two examples of a batch share a key (a positive text), greedily as
 * sentence-transformers' NO_DUPLICATES sampler does: each batch takes, in the epoch's order,
 * the first examples not yet placed none of whose keys the batch holds yet. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"

/* Keys of example e: keys[e * per_example .. (e + 1) * per_example). */
static bool clashes(const int64_t *keys, int per_example, int64_t e, const int64_t *used_by, int64_t batch) {
    for (int k = 0; k < per_example; k++)
        if (used_by[keys[e * per_example + k]] == batch) return true;
    return false;
}

static void take(const int64_t *keys, int per_example, int64_t e, int64_t *used_by, int64_t batch) {
    for (int k = 0; k < per_example; k++) used_by[keys[e * per_example + k]] = batch;
}

int64_t gc_batch_order_distinct(int64_t *order, int64_t count, int64_t batch_size, const int64_t *keys,
                                int per_example, int64_t n_keys) {
    int64_t *pending = malloc((size_t)count * sizeof *pending), *used_by = malloc((size_t)n_keys * sizeof *used_by);
    if ((count && !pending) || (n_keys && !used_by)) gc_fatal("batch_order_distinct: out of host memory");
    memcpy(pending, order, (size_t)count * sizeof *order);
    for (int64_t k = 0; k < n_keys; k++) used_by[k] = -1;
    int64_t n_pending = count, placed = 0, repeated = 0, batches = count / batch_size;
    for (int64_t b = 0; b < batches; b++) {
        int64_t members = 0, kept = 0;
        /* one pass over the pending examples: take what fits, keep the rest in order */
        for (int64_t i = 0; i < n_pending; i++) {
            int64_t e = pending[i];
            if (members < batch_size && !clashes(keys, per_example, e, used_by, b)) {
                take(keys, per_example, e, used_by, b);
                order[placed++] = e;
                members++;
            } else {
                pending[kept++] = e;
            }
        }
        n_pending = kept;
        if (members < batch_size) {
            /* no pending example fits (a key in more examples than there are batches left,
             * or nothing to spare): the batch takes the first pending ones as they come */
            repeated++;
            int64_t fill = batch_size - members; /* pending holds them: count >= batches * batch_size */
            memcpy(order + placed, pending, (size_t)fill * sizeof *order);
            memmove(pending, pending + fill, (size_t)(n_pending - fill) * sizeof *pending);
            placed += fill;
            n_pending -= fill;
        }
    }
    memcpy(order + placed, pending, (size_t)n_pending * sizeof *order); /* the examples no batch takes */
    free(used_by);
    free(pending);
    return repeated;
}
