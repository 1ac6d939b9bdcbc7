/* libFuzzer target for the BPE tokenizers' text path: any bytes (invalid UTF-8 included)
 * through the six fixture tokenizers (byte-level with GPT-2's, Qwen2's and Llama-3's
 * pre-tokenizers, tests/fixtures/bpe_*.json; SentencePiece-style with Llama-2's Prepend and
 * Replace, Mistral's Metaspace and a splitting Metaspace without byte fallback,
 * tests/fixtures/spm_*.json) must give ids inside the vocabulary, at most max_length of them,
 * the same twice; the splits (Metaspace's too) must cut any code points into non-empty pieces
 * that cover them; NFC must be idempotent. Never a crash, a hang, a leak or an
 * out-of-bounds read: a long run of one class (the heap's n log n merges) included. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/tokenizer.h"
#include "nn/tokenize/tokenizer_internal.h"
#include "base/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KINDS 6
static const char *const kinds[KINDS] = {"bpe_gpt2", "bpe_qwen2", "bpe_llama3", "spm_llama2", "spm_mistral",
                                         "spm_metaspace"};
static const gc_bpe_split splits[3] = {GC_BPE_SPLIT_GPT2, GC_BPE_SPLIT_QWEN2, GC_BPE_SPLIT_LLAMA3};

static const gc_tokenizer *tokenizer_of(int kind) {
    static gc_tokenizer *loaded[KINDS]; /* kept for the process: the fuzzer calls this millions of times */
    if (!loaded[kind]) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.json", GC_FUZZ_FIXTURES, kinds[kind]);
        if (gc_tokenizer_load(path, &loaded[kind]) != GC_OK) abort();
    }
    return loaded[kind];
}

static void check_encoding(const gc_tokenizer *tokenizer, const char *text) {
    int32_t ids[256], again[256];
    for (int64_t max_length = 4; max_length <= 256; max_length *= 4) {
        int64_t count = gc_tokenizer_encode(tokenizer, text, max_length, ids);
        if (count < 0 || count > max_length || gc_tokenizer_encode(tokenizer, text, max_length, again) != count ||
            memcmp(ids, again, (size_t)count * sizeof *ids))
            abort();
        for (int64_t i = 0; i < count; i++)
            if (ids[i] < 0 || ids[i] >= gc_tokenizer_vocab_size(tokenizer)) abort();
    }
}

static void check_codes(const uint8_t *data, size_t size) {
    gc_codes codes = {0}, twice = {0};
    for (size_t at = 0; at < size;) {
        uint32_t code;
        size_t step = gc_utf8_decode(data + at, size - at, &code);
        gc_codes_push(&codes, step ? code : 0xFFFD);
        at += step ? step : 1;
    }
    for (int k = 0; k < 4; k++) /* the three splits, then Metaspace's at "▁" */
        for (size_t at = 0; at < codes.count;) {
            size_t length = k < 3 ? gc_bpe_piece_length(splits[k], codes.items, codes.count, at)
                                  : gc_metaspace_piece_length(0x2581, codes.items, codes.count, at);
            if (length < 1 || length > codes.count - at) abort();
            at += length;
        }
    gc_nfc(&codes);
    for (size_t i = 0; i < codes.count; i++) gc_codes_push(&twice, codes.items[i]);
    gc_nfc(&twice);
    if (codes.failed || twice.failed || twice.count != codes.count ||
        memcmp(twice.items, codes.items, codes.count * sizeof *codes.items))
        abort();
    free(codes.items);
    free(twice.items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    for (int k = 0; k < KINDS; k++) check_encoding(tokenizer_of(k), text);
    check_codes(data, size);
    free(text);
    return 0;
}
