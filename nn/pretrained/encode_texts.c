/* Encoding texts with a text encoder and a tokenizer (include/gradcache/pretrained.h).
 *
 * Inference only: grad mode off, so no op records anything for a backward and every
 * intermediate goes when its last reference does. Three things keep it fast:
 *  - padding cut: the texts are taken in order of length (bytes, which track tokens closely),
 *    so that a batch's texts pad to about one length, and the rows are put back in the
 *    caller's order at the end by one gather;
 *  - longest first: the first batches make the largest blocks, and the later, shorter ones
 *    run in them (the block cache lends a block up to twice a request's size,
 *    tensor/alloc.c), where shortest first made fresh blocks for each new length;
 *  - the tokenizer off the critical path: the next batch is tokenized by a thread of its own
 *    while the encoder runs on the current one;
 *  - the weights' packed panels (tensor/packed.c), kept from the second batch on.
 * A text's vector does not depend on its batch: a padded key's attention weight is exactly 0,
 * and every row of a product is summed alike whatever the others. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "gradcache/pretrained.h"

/* One batch to tokenize: texts[start, end) of the sorted texts, and what came of it. */
typedef struct token_batch {
    const gc_text_encoder *encoder;
    const gc_tokenizer *tokenizer;
    const char *prompt;
    const char *const *texts;
    int64_t start, end, max_length;
    gc_tensor *ids, *mask; /* [end - start, T] */
    gc_status status;
    char message[512]; /* the tokenizer thread's error, for the caller's thread */
} token_batch;

static void *tokenize_batch(void *arg) {
    token_batch *b = arg;
    b->status = gc_tokenize_prompted(b->tokenizer, b->prompt, b->texts + b->start, b->end - b->start, b->max_length,
                                     GC_PAD_TO_LONGEST, b->encoder->config.dtype,
                                     b->encoder->tokens.weight->device, &b->ids, &b->mask);
    if (b->status != GC_OK) snprintf(b->message, sizeof b->message, "%s", gc_last_error());
    return NULL;
}

/* The batch's representations into rows [start, end) of sorted [count, D]. */
static gc_status encode_batch(const token_batch *b, gc_tensor *sorted) {
    gc_tensor *output = gc_text_encoder_forward(b->encoder, b->ids, b->mask, false); /* [end - start, D] */
    gc_tensor *widened = output && output->dtype != sorted->dtype ? gc_cast(output, sorted->dtype) : NULL;
    gc_tensor *rows = gc_slice0(sorted, b->start, b->end);
    gc_status status = output && rows && (widened || output->dtype == sorted->dtype)
                           ? gc_copy_(rows, widened ? widened : output)
                           : gc_last_status();
    gc_tensor_release(rows);
    gc_tensor_release(widened);
    gc_tensor_release(output);
    return status;
}

/* The order of the texts by length, longest first (stable: equal lengths keep the caller's
 * order). */
typedef struct by_length {
    size_t length;
    int64_t index;
} by_length;

static int compare_lengths(const void *x, const void *y) {
    const by_length *a = x, *b = y;
    if (a->length != b->length) return a->length > b->length ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The texts sorted by length, longest first, into sorted[count], and where each text went:
 * position[i] is text i's row among them (i32, for the gather back). NULL when host memory
 * runs out. */
static const char **sort_by_length(const char *const *texts, int64_t count, int32_t *position) {
    by_length *keys = malloc((size_t)count * sizeof *keys);
    const char **sorted = malloc((size_t)count * sizeof *sorted);
    if (keys && sorted) {
        for (int64_t i = 0; i < count; i++) keys[i] = (by_length){strlen(texts[i]), i};
        qsort(keys, (size_t)count, sizeof *keys, compare_lengths);
        for (int64_t i = 0; i < count; i++) {
            sorted[i] = texts[keys[i].index];
            position[keys[i].index] = (int32_t)i;
        }
    } else {
        free(sorted);
        sorted = NULL;
    }
    free(keys);
    return sorted;
}

/* Every batch of the sorted texts into `sorted`, tokenizing batch i + 1 in a thread of its own
 * while batch i is encoded. */
static gc_status encode_sorted(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer,
                               const char *const *texts, int64_t count, const gc_encode_options *o,
                               gc_tensor *sorted) {
    token_batch batches[2];
    int64_t size = o->batch;
    for (int i = 0; i < 2; i++)
        batches[i] = (token_batch){encoder, tokenizer, o->prompt, texts, .max_length = o->max_length};
    token_batch *current = &batches[0], *next = &batches[1];
    current->end = size < count ? size : count;
    tokenize_batch(current);
    gc_status status = current->status;
    while (status == GC_OK) {
        next->start = current->end;
        next->end = next->start + size < count ? next->start + size : count;
        pthread_t thread;
        bool ahead = next->start < count && pthread_create(&thread, NULL, tokenize_batch, next) == 0;
        if (!ahead && next->start < count) tokenize_batch(next); /* no thread: in turn */
        status = encode_batch(current, sorted);
        if (ahead) pthread_join(thread, NULL);
        gc_tensor_release(current->ids);
        gc_tensor_release(current->mask);
        current->ids = current->mask = NULL;
        if (status == GC_OK && o->progress) o->progress(o->progress_context, current->end, count);
        if (next->start >= count) break;
        if (status == GC_OK && next->status != GC_OK) {
            gc_set_error(next->status, "%s", next->message);
            status = next->status;
        }
        token_batch *done = current;
        current = next;
        next = done;
    }
    gc_tensor_release(next->ids);
    gc_tensor_release(next->mask);
    gc_tensor_release(current->ids);
    gc_tensor_release(current->mask);
    return status;
}

gc_tensor *gc_encode_texts_with(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer,
                                const char *const *texts, int64_t count, const gc_encode_options *options) {
    const gc_encode_options *o = options;
    if (count < 1 || o->batch < 1 || count > INT32_MAX)
        gc_fatal("encode_texts: %lld texts in batches of %lld (want 1 to 2^31 - 1 texts, batches of at least 1)",
                 (long long)count, (long long)o->batch);
    const gc_text_encoder_config *c = &encoder->config;
    if (o->max_length > c->max_length)
        gc_fatal("encode_texts: max length %lld is more than the encoder's %lld positions", (long long)o->max_length,
                 (long long)c->max_length);
    int64_t width = c->projection ? c->projection : c->dim;
    gc_device device = encoder->tokens.weight->device;
    int32_t *position = malloc((size_t)count * sizeof *position);
    const char **by_length = position ? sort_by_length(texts, count, position) : NULL;
    if (!by_length) {
        free(position);
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "encode_texts: out of host memory to sort %lld texts", (long long)count);
        return NULL;
    }
    bool previous = gc_set_grad_enabled(false);
    /* f32 whatever the encoder's dtype: retrieval scores and ranks in f32 */
    gc_tensor *sorted = gc_empty(GC_SHAPE(count, width), gc_working_dtype(c->dtype), device);
    gc_tensor *rows = gc_from_host(position, GC_SHAPE(count), GC_I32, device);
    gc_tensor *result = NULL;
    if (sorted && rows && encode_sorted(encoder, tokenizer, by_length, count, o, sorted) == GC_OK)
        result = gc_embedding(sorted, rows); /* [count, D] in the caller's order */
    gc_set_grad_enabled(previous);
    gc_tensor_release(sorted);
    gc_tensor_release(rows);
    free(by_length);
    free(position);
    return result;
}

gc_tensor *gc_encode_texts(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *const *texts,
                           int64_t count, int64_t max_length, int64_t batch) {
    return gc_encode_texts_prompted(encoder, tokenizer, NULL, texts, count, max_length, batch);
}

gc_tensor *gc_encode_texts_prompted(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *prompt,
                                    const char *const *texts, int64_t count, int64_t max_length, int64_t batch) {
    gc_encode_options options = {.max_length = max_length, .batch = batch, .prompt = prompt};
    return gc_encode_texts_with(encoder, tokenizer, texts, count, &options);
}
