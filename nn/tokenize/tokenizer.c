/* The tokenizer interface (include/gradcache/tokenizer.h): the byte-level tokenizer, the
 * WordPiece pipeline around its steps (added tokens, template, truncation), and batches of
 * padded ids and masks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/ops.h"
#include "nn/tokenize/tokenizer_internal.h"

static const gc_tokenizer byte_tokenizer = {.bytes = true, .vocab_size = GC_TOKEN_VOCAB, .pad_id = GC_TOKEN_PAD};

const gc_tokenizer *gc_tokenizer_bytes(void) { return &byte_tokenizer; }

void gc_tokenizer_free(const gc_tokenizer *tokenizer) {
    if (!tokenizer || tokenizer->bytes) return;
    gc_tokenizer *owned = (gc_tokenizer *)tokenizer; /* every other tokenizer was allocated by a load */
    for (int64_t i = 0; owned->vocab && i < owned->vocab_size; i++) free(owned->vocab[i]);
    for (int i = 0; i < owned->n_added; i++) free(owned->added[i].content);
    free(owned->vocab);
    free(owned->slots);
    free(owned->prefix);
    free(owned->added);
    free(owned->bpe.merges);
    for (int i = 0; i < owned->bpe.n_steps; i++) {
        free(owned->bpe.steps[i].pattern.items);
        free(owned->bpe.steps[i].text.items);
    }
    free(owned->bpe.steps);
    free(owned);
}

int64_t gc_tokenizer_vocab_size(const gc_tokenizer *tokenizer) { return tokenizer->vocab_size; }

int32_t gc_tokenizer_pad_id(const gc_tokenizer *tokenizer) { return tokenizer->pad_id; }

const char *gc_tokenizer_token(const gc_tokenizer *tokenizer, int32_t id, char buffer[16]) {
    if (id < 0 || id >= tokenizer->vocab_size) return NULL;
    if (!tokenizer->bytes) return tokenizer->vocab[id];
    if (id == GC_TOKEN_PAD) return "[PAD]";
    if (id == GC_TOKEN_CLS) return "[CLS]";
    snprintf(buffer, 16, "<0x%02X>", (unsigned)(id - GC_TOKEN_FIRST_BYTE));
    return buffer;
}

static int64_t encode_bytes(const char *text, int64_t max_length, int32_t *ids) {
    int64_t count = 0;
    ids[count++] = GC_TOKEN_CLS;
    for (const unsigned char *byte = (const unsigned char *)text; count < max_length && *byte; byte++)
        ids[count++] = GC_TOKEN_FIRST_BYTE + *byte;
    return count;
}

/* The longest added token spelled at `text`, or NULL. */
static const gc_added_token *added_token_at(const gc_tokenizer *tokenizer, const char *text) {
    const gc_added_token *best = NULL;
    for (int i = 0; i < tokenizer->n_added; i++) {
        const gc_added_token *token = &tokenizer->added[i];
        if ((!best || token->length > best->length) && strncmp(text, token->content, token->length) == 0)
            best = token;
    }
    return best;
}

/* A text between added tokens through the tokenizer's model (`at_start`: it starts the whole text). */
static bool encode_text(const gc_tokenizer *tokenizer, const char *text, size_t length, bool at_start, int32_t *ids,
                        int64_t *count, int64_t limit) {
    return tokenizer->bpe_model ? gc_bpe_encode_text(tokenizer, text, length, at_start, ids, count, limit)
                          : gc_wordpiece_encode_text(tokenizer, text, length, ids, count, limit);
}

/* The text between added tokens goes through the model; the added tokens are ids as they are. */
static bool encode_pieces(const gc_tokenizer *tokenizer, const char *text, int32_t *ids, int64_t *count,
                          int64_t limit) {
    const char *segment = text;
    for (const char *at = text; *at && *count < limit;) {
        const gc_added_token *token = added_token_at(tokenizer, at);
        if (!token) {
            at++;
            continue;
        }
        if (!encode_text(tokenizer, segment, (size_t)(at - segment), segment == text, ids, count, limit)) return false;
        if (*count < limit) ids[(*count)++] = token->id;
        segment = at += token->length;
    }
    return *count >= limit || encode_text(tokenizer, segment, strlen(segment), segment == text, ids, count, limit);
}

int64_t gc_tokenizer_special_count(const gc_tokenizer *tokenizer) {
    return tokenizer->bytes ? 1 : tokenizer->n_before + tokenizer->n_after;
}

int64_t gc_tokenizer_encode(const gc_tokenizer *tokenizer, const char *text, int64_t max_length, int32_t *ids) {
    int64_t special = gc_tokenizer_special_count(tokenizer);
    if (max_length < special + 1)
        gc_fatal("tokenizer_encode: max length %lld leaves no room for text after %lld special tokens",
                 (long long)max_length, (long long)special);
    if (tokenizer->bytes) return encode_bytes(text, max_length, ids);
    int64_t count = 0;
    for (int i = 0; i < tokenizer->n_before; i++) ids[count++] = tokenizer->before[i];
    /* truncation cuts the text's tokens: the template's last tokens ([SEP]) always fit */
    if (!encode_pieces(tokenizer, text, ids, &count, max_length - tokenizer->n_after)) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "tokenizer_encode: out of host memory");
        return -1;
    }
    for (int i = 0; i < tokenizer->n_after; i++) ids[count++] = tokenizer->after[i];
    return count;
}

/* The ids of `prompt` followed by `text` (one string: a split may join them, as it does in
 * the reference), at most max_length. */
static int64_t encode_prompted(const gc_tokenizer *tokenizer, const char *prompt, const char *text, int64_t max_length,
                               int32_t *ids) {
    if (!prompt) return gc_tokenizer_encode(tokenizer, text, max_length, ids);
    size_t prompt_length = strlen(prompt), text_length = strlen(text);
    char *joined = malloc(prompt_length + text_length + 1);
    if (!joined) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "tokenize: out of host memory for a prompted text");
        return -1;
    }
    memcpy(joined, prompt, prompt_length);
    memcpy(joined + prompt_length, text, text_length + 1);
    int64_t count = gc_tokenizer_encode(tokenizer, joined, max_length, ids);
    free(joined);
    return count;
}

gc_status gc_tokenize(const gc_tokenizer *tokenizer, const char *const *texts, int64_t count, int64_t max_length,
                      gc_padding padding, gc_dtype mask_dtype, gc_device device, gc_tensor **ids, gc_tensor **mask) {
    return gc_tokenize_prompted(tokenizer, NULL, texts, count, max_length, padding, mask_dtype, device, ids, mask);
}

gc_status gc_tokenize_prompted(const gc_tokenizer *tokenizer, const char *prompt, const char *const *texts,
                               int64_t count, int64_t max_length, gc_padding padding, gc_dtype mask_dtype,
                               gc_device device, gc_tensor **ids, gc_tensor **mask) {
    *ids = *mask = NULL;
    if (count < 0 || max_length < 1)
        gc_fatal("tokenize: %lld texts of at most %lld tokens", (long long)count, (long long)max_length);
    size_t cells = (size_t)(count * max_length);
    int32_t *id_values = malloc((cells ? cells : 1) * sizeof *id_values);
    int64_t *lengths = malloc((size_t)(count ? count : 1) * sizeof *lengths);
    if (!id_values || !lengths) {
        free(id_values);
        free(lengths);
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "tokenize: out of host memory for %zu tokens", cells);
        return GC_ERR_OUT_OF_MEMORY;
    }
    int64_t width = padding == GC_PAD_TO_MAX_LENGTH ? max_length : 1;
    gc_status status = GC_OK;
    for (int64_t row = 0; row < count && status == GC_OK; row++) {
        lengths[row] = encode_prompted(tokenizer, prompt, texts[row], max_length, id_values + row * max_length);
        if (lengths[row] < 0) status = gc_last_status();
        else if (lengths[row] > width) width = lengths[row];
    }
    /* rows of `width` ids, padded, and their masks, built in place of the max_length rows */
    float *mask_values = status == GC_OK ? malloc((size_t)(count ? count * width : 1) * sizeof *mask_values) : NULL;
    if (status == GC_OK && !mask_values) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "tokenize: out of host memory for %zu tokens", cells);
        status = GC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t row = 0; row < count && status == GC_OK; row++) {
        int32_t *out = id_values + row * width;
        memmove(out, id_values + row * max_length, (size_t)lengths[row] * sizeof *out); /* width <= max_length */
        for (int64_t t = 0; t < width; t++) {
            if (t >= lengths[row]) out[t] = tokenizer->pad_id;
            mask_values[row * width + t] = t < lengths[row] ? 1.0f : 0.0f;
        }
    }
    if (status == GC_OK) {
        gc_tensor *host_mask = gc_from_host(mask_values, GC_SHAPE(count, width), GC_F32, gc_cpu());
        gc_tensor *host_ids = gc_from_host(id_values, GC_SHAPE(count, width), GC_I32, gc_cpu());
        gc_tensor *typed_mask = gc_cast(host_mask, mask_dtype);
        *ids = gc_to_device(host_ids, device);
        *mask = gc_to_device(typed_mask, device);
        gc_tensor_release(host_mask);
        gc_tensor_release(host_ids);
        gc_tensor_release(typed_mask);
        status = *ids && *mask ? GC_OK : gc_last_status();
    }
    free(id_values);
    free(lengths);
    free(mask_values);
    if (status == GC_OK) return GC_OK;
    gc_tensor_release(*ids);
    gc_tensor_release(*mask);
    *ids = *mask = NULL;
    return status;
}
