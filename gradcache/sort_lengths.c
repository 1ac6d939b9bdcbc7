/* Length-sorted chunks (gc_cache_config.sort_by): a model's rows split in order of their real
 * tokens, so that a chunk holds texts of similar lengths and a split that cuts each chunk to its
 * longest text (gc_split_by_tokens) cuts nearly all of the padding. The cache puts the chunks'
 * representations back in the batch's order before the loss and its gradients in the chunks'
 * order after it: the loss sees the batch as given, and the gradients are the full batch's. */
#include <stdlib.h>

#include "gradcache/ops.h"
#include "split.h"

typedef struct row_length {
    int64_t tokens, row;
} row_length;

/* Longest first (the step's largest chunk comes first, where an out-of-memory shows at once);
 * equal lengths in batch order, so the order is the same on every platform (qsort is not stable). */
static int longest_first(const void *a, const void *b) {
    const row_length *x = a, *y = b;
    if (x->tokens != y->tokens) return x->tokens > y->tokens ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* x's rows order[0..rows) in that order: one view per run of consecutive rows, concatenated
 * (cat0 and slice0 work for every dtype and device, and record a graph when one is wanted). */
static gc_tensor *rows_in_order(gc_tensor *x, const int64_t *order) {
    int64_t rows = x->shape[0];
    gc_tensor **runs = calloc((size_t)(rows > 0 ? rows : 1), sizeof *runs);
    if (!runs) gc_fatal("sort_by: out of host memory for %lld rows", (long long)rows);
    int count = 0;
    for (int64_t i = 0; i < rows;) {
        int64_t end = i + 1;
        while (end < rows && order[end] == order[end - 1] + 1) end++;
        runs[count++] = gc_slice0(x, order[i], order[end - 1] + 1); /* a view: cannot fail */
        i = end;
    }
    gc_tensor *ordered = gc_cat0(runs, count);
    for (int r = 0; r < count; r++) gc_tensor_release(runs[r]);
    free(runs);
    return ordered;
}

gc_status gc_row_order_begin(const gc_batch *input, const char *mask, gc_row_order *order) {
    *order = (gc_row_order){0}; /* nothing to release until the batch below */
    int64_t rows = gc_batch_rows(input);
    int64_t *tokens = mask ? gc_row_tokens(gc_batch_mask("sort_by", input, mask)) : NULL;
    if (mask && !tokens) return gc_last_status();
    row_length *sorted = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *sorted);
    if (!sorted) gc_fatal("sort_by: out of host memory for %lld rows", (long long)rows);
    bool moved = false;
    for (int64_t r = 0; r < rows && tokens; r++) sorted[r] = (row_length){tokens[r], r};
    if (tokens) qsort(sorted, (size_t)rows, sizeof *sorted, longest_first);
    for (int64_t r = 0; r < rows && tokens; r++) moved = moved || sorted[r].row != r;
    free(tokens);
    if (moved) { /* an order that moves nothing is none: nothing is copied */
        order->order = malloc((size_t)rows * sizeof *order->order);
        order->inverse = malloc((size_t)rows * sizeof *order->inverse);
        if (!order->order || !order->inverse) gc_fatal("sort_by: out of host memory for %lld rows", (long long)rows);
        for (int64_t i = 0; i < rows; i++) order->order[i] = sorted[i].row, order->inverse[sorted[i].row] = i;
    }
    free(sorted);
    order->batch = *input;
    bool failed = false;
    for (int i = 0; i < input->count; i++) {
        order->batch.tensors[i] = moved ? rows_in_order(input->tensors[i], order->order)
                                        : gc_tensor_retain(input->tensors[i]);
        failed = failed || !order->batch.tensors[i];
    }
    if (!failed) return GC_OK;
    gc_status status = gc_last_status();
    gc_row_order_end(order);
    return status;
}

gc_tensor *gc_row_order_to_batch(const gc_row_order *order, gc_tensor *x) {
    return order->order ? rows_in_order(x, order->inverse) : gc_tensor_retain(x);
}

gc_tensor *gc_row_order_to_chunks(const gc_row_order *order, gc_tensor *x) {
    return order->order ? rows_in_order(x, order->order) : gc_tensor_retain(x);
}

void gc_row_order_end(gc_row_order *order) {
    for (int i = 0; i < order->batch.count; i++) gc_tensor_release(order->batch.tensors[i]);
    free(order->order);
    free(order->inverse);
    *order = (gc_row_order){0};
}
