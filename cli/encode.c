/* Encoding texts with a trained tower (see encode.h). */
#include "encode.h"
#include "tokenizer.h"

/* Encodes texts[start, end) into rows [start, end) of result [count, D]. */
static gc_status encode_rows(const gc_text_encoder *tower, const char *const *texts, int64_t start, int64_t end,
                             gc_tensor *result) {
    gc_tensor *ids, *mask; /* [end - start, max_length] */
    gc_status status = gc_tokenize(texts + start, end - start, tower->config.max_length, tower->config.dtype,
                                   tower->tokens.weight->device, &ids, &mask);
    if (status != GC_OK) return status;
    gc_tensor *output = gc_text_encoder_forward(tower, ids, mask, false); /* [end - start, D] */
    gc_tensor *widened = output && output->dtype != result->dtype ? gc_cast(output, result->dtype) : NULL;
    gc_tensor *rows = gc_slice0(result, start, end);
    status = output && rows && (widened || output->dtype == result->dtype)
                 ? gc_copy_(rows, widened ? widened : output)
                 : gc_last_status();
    gc_tensor_release(rows);
    gc_tensor_release(widened);
    gc_tensor_release(output);
    gc_tensor_release(ids);
    gc_tensor_release(mask);
    return status;
}

gc_tensor *gc_encode_texts(const gc_text_encoder *tower, const char *const *texts, int64_t count, int64_t batch) {
    if (count < 1 || batch < 1)
        gc_fatal("encode_texts: %lld texts in batches of %lld (want at least 1 of each)", (long long)count,
                 (long long)batch);
    const gc_text_encoder_config *c = &tower->config;
    int64_t width = c->projection ? c->projection : c->dim;
    bool previous = gc_set_grad_enabled(false);
    /* f32 whatever the tower's dtype: retrieval scores and ranks in f32 */
    gc_tensor *result = gc_empty(GC_SHAPE(count, width), gc_working_dtype(c->dtype), tower->tokens.weight->device);
    gc_status status = result ? GC_OK : gc_last_status();
    for (int64_t start = 0; start < count && status == GC_OK; start += batch)
        status = encode_rows(tower, texts, start, start + batch < count ? start + batch : count, result);
    gc_set_grad_enabled(previous);
    if (status == GC_OK) return result;
    gc_tensor_release(result);
    return NULL;
}
