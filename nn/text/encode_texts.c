/* Encoding texts with a text encoder and a tokenizer (include/gradcache/pretrained.h). */
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "gradcache/pretrained.h"

/* Encodes texts[start, end) into rows [start, end) of result [count, D]. */
static gc_status encode_rows(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *prompt,
                             const char *const *texts, int64_t start, int64_t end, int64_t max_length,
                             gc_tensor *result) {
    gc_tensor *ids, *mask; /* [end - start, T] */
    gc_status status = gc_tokenize_prompted(tokenizer, prompt, texts + start, end - start, max_length,
                                            GC_PAD_TO_LONGEST, encoder->config.dtype, encoder->tokens.weight->device,
                                            &ids, &mask);
    if (status != GC_OK) return status;
    gc_tensor *output = gc_text_encoder_forward(encoder, ids, mask, false); /* [end - start, D] */
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

gc_tensor *gc_encode_texts(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *const *texts,
                           int64_t count, int64_t max_length, int64_t batch) {
    return gc_encode_texts_prompted(encoder, tokenizer, NULL, texts, count, max_length, batch);
}

gc_tensor *gc_encode_texts_prompted(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *prompt,
                                    const char *const *texts, int64_t count, int64_t max_length, int64_t batch) {
    if (count < 1 || batch < 1)
        gc_fatal("encode_texts: %lld texts in batches of %lld (want at least 1 of each)", (long long)count,
                 (long long)batch);
    const gc_text_encoder_config *c = &encoder->config;
    if (max_length > c->max_length)
        gc_fatal("encode_texts: max length %lld is more than the encoder's %lld positions", (long long)max_length,
                 (long long)c->max_length);
    int64_t width = c->projection ? c->projection : c->dim;
    bool previous = gc_set_grad_enabled(false);
    /* f32 whatever the encoder's dtype: retrieval scores and ranks in f32 */
    gc_tensor *result = gc_empty(GC_SHAPE(count, width), gc_working_dtype(c->dtype), encoder->tokens.weight->device);
    gc_status status = result ? GC_OK : gc_last_status();
    for (int64_t start = 0; start < count && status == GC_OK; start += batch)
        status = encode_rows(encoder, tokenizer, prompt, texts, start, start + batch < count ? start + batch : count,
                             max_length, result);
    gc_set_grad_enabled(previous);
    if (status == GC_OK) return result;
    gc_tensor_release(result);
    return NULL;
}
