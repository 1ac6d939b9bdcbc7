/* Chunks by token budget (gc_split_by_tokens, gradcache/cache.h): consecutive rows while their
 * real tokens (the mask's sum) fit the budget, each chunk cut to its own longest row, so that a
 * chunk of short texts computes no padding its batch's longest text put there. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "split.h"

int64_t *gc_row_tokens(const gc_tensor *mask) {
    int64_t rows = mask->shape[0];
    double *sums = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *sums);
    int64_t *tokens = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *tokens);
    if (!sums || !tokens) gc_fatal("split_by_tokens: out of host memory for %lld rows", (long long)rows);
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *summed = gc_sum_last(mask, false); /* [rows] */
    gc_set_grad_enabled(previous);
    if (!summed) {
        free(sums);
        free(tokens);
        return NULL;
    }
    gc_to_host_f64(summed, sums);
    gc_tensor_release(summed);
    for (int64_t r = 0; r < rows; r++) tokens[r] = (int64_t)sums[r];
    free(sums);
    return tokens;
}

/* Columns [0, length) of x [rows, T] (a copy), or x itself (retained) when length is T or x
 * is not [rows, T]. */
static gc_tensor *first_columns(gc_tensor *x, int64_t tokens, int64_t length) {
    if (x->ndim != 2 || x->shape[1] != tokens || length == tokens) return gc_tensor_retain(x);
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *by_column = gc_transpose(x, 0, 1); /* [T, rows] */
    gc_tensor *kept = by_column ? gc_slice0(by_column, 0, length) : NULL;
    gc_tensor *cut = kept ? gc_transpose(kept, 0, 1) : NULL;
    gc_set_grad_enabled(previous);
    gc_tensor_release(by_column);
    gc_tensor_release(kept);
    return cut;
}

const gc_tensor *gc_batch_mask(const char *op, const gc_batch *batch, const char *name) {
    const gc_tensor *mask = NULL;
    for (int i = 0; i < batch->count; i++)
        if (strcmp(batch->names[i], name) == 0) mask = batch->tensors[i];
    if (!mask || mask->ndim != 2) gc_fatal("%s: no mask [rows, T] named '%s' in the batch", op, name);
    return mask;
}

int gc_split_by_tokens(const gc_batch *input, int64_t chunk_size, gc_batch *chunks, int capacity, void *user) {
    const gc_token_budget *budget = user;
    if (!budget || budget->max_tokens < 1)
        gc_fatal("split_by_tokens: needs a gc_token_budget of at least 1 token as the cache's user");
    int64_t rows = gc_batch_rows(input);
    const gc_tensor *mask = gc_batch_mask("split_by_tokens", input, budget->mask);
    int64_t *tokens = gc_row_tokens(mask), width = mask->shape[1];
    if (!tokens) return -1;
    int count = 0;
    bool failed = false;
    for (int64_t start = 0; start < rows && !failed; count++) {
        /* at least one row; then rows while the budget and the chunk size allow */
        int64_t end = start + 1, used = tokens[start], longest = tokens[start];
        while (end < rows && end - start < chunk_size && used + tokens[end] <= budget->max_tokens) {
            used += tokens[end];
            longest = tokens[end] > longest ? tokens[end] : longest;
            end++;
        }
        if (count == capacity) gc_fatal("split_by_tokens: more than %d chunks", capacity);
        chunks[count] = (gc_batch){.count = input->count};
        for (int i = 0; i < input->count; i++) {
            gc_tensor *rows_view = gc_slice0(input->tensors[i], start, end);
            chunks[count].names[i] = input->names[i];
            chunks[count].tensors[i] = first_columns(rows_view, width, longest > 0 ? longest : 1);
            failed = failed || !chunks[count].tensors[i];
            gc_tensor_release(rows_view);
        }
        start = end;
    }
    if (failed) { /* nothing is kept: the cache takes no chunks from a failed split */
        for (int c = 0; c < count; c++) gc_batch_release(&chunks[c]);
        count = -1;
    }
    free(tokens);
    return count;
}
