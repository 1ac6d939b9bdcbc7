/* The default split of a model input: every tensor cut along dim 0 into views. */
#include "split.h"

int64_t gc_batch_rows(const gc_batch *batch) {
    if (batch->count < 1 || batch->count > GC_BATCH_MAX_TENSORS)
        gc_fatal("cache: a batch needs 1 to %d tensors, got %d", GC_BATCH_MAX_TENSORS, batch->count);
    int64_t rows = -1;
    for (int i = 0; i < batch->count; i++) {
        const gc_tensor *t = batch->tensors[i];
        char text[128];
        if (!t || t->ndim < 1)
            gc_fatal("cache: batch tensor '%s' is %s; every tensor needs a batch dim", batch->names[i],
                     t ? gc_tensor_str(t, text, sizeof text) : "NULL");
        if (rows >= 0 && t->shape[0] != rows)
            gc_fatal("cache: batch tensor '%s' has %lld rows, the first has %lld", batch->names[i],
                     (long long)t->shape[0], (long long)rows);
        rows = t->shape[0];
    }
    return rows;
}

int gc_chunk_count(int64_t rows, int64_t chunk_size) {
    if (chunk_size < 1) gc_fatal("cache: chunk size %lld must be at least 1", (long long)chunk_size);
    /* not (rows + chunk_size - 1) / chunk_size, which overflows for a chunk size near 2^63 */
    return (int)(rows / chunk_size + (rows % chunk_size != 0));
}

int gc_split_by_rows(const gc_batch *input, int64_t chunk_size, gc_batch *chunks, int capacity, void *user) {
    (void)user;
    int64_t rows = gc_batch_rows(input);
    int count = gc_chunk_count(rows, chunk_size);
    if (count > capacity) gc_fatal("cache: %d chunks do not fit %d slots", count, capacity);
    for (int c = 0; c < count; c++) {
        int64_t start = c * chunk_size, end = start + chunk_size < rows ? start + chunk_size : rows;
        chunks[c] = (gc_batch){.count = input->count};
        for (int i = 0; i < input->count; i++) {
            chunks[c].names[i] = input->names[i];
            chunks[c].tensors[i] = gc_slice0(input->tensors[i], start, end); /* a view: cannot fail */
        }
    }
    return count;
}

void gc_batch_release(gc_batch *batch) {
    for (int i = 0; i < batch->count; i++) gc_tensor_release(batch->tensors[i]);
    batch->count = 0;
}
