/* libFuzzer target for the tokenizer.json reader (and the JSON document grammar under it):
 * any input must load or fail with GC_ERR_FORMAT and a message naming the file, never crash,
 * hang, leak or read out of bounds; a tokenizer that loads must encode any text (the input
 * itself, as raw bytes: invalid UTF-8 included) into ids inside its vocabulary. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_tokenizer *tokenizer = NULL;
    gc_status status = gc_tokenizer_load_memory((const char *)data, size, "fuzz.json", &tokenizer);
    if (status != GC_OK) {
        if (status != GC_ERR_FORMAT || tokenizer || strncmp(gc_last_error(), "fuzz.json: ", 11) != 0) abort();
        gc_clear_error();
        return 0;
    }
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    int32_t ids[64];
    for (int64_t max_length = 8; max_length <= 64; max_length *= 8) {
        int64_t count = gc_tokenizer_encode(tokenizer, text, max_length, ids);
        if (count < 0 || count > max_length) abort();
        for (int64_t i = 0; i < count; i++)
            if (ids[i] < 0 || ids[i] >= gc_tokenizer_vocab_size(tokenizer)) abort();
    }
    free(text);
    gc_tokenizer_free(tokenizer);
    return 0;
}
