/* WordPiece: the vocabulary's hash, the pre-tokeniser's words and the greedy longest-match
 * split of each word (steps 3 and 4 of include/gradcache/tokenizer.h). */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenize/tokenizer_internal.h"
#include "base/utf8.h"

/* FNV-1a: short keys, no adversary worth a keyed hash (the vocabulary is the model's own). */
static uint64_t hash_bytes(const char *text, size_t length) {
    uint64_t hash = 0xCBF29CE484222325u;
    for (size_t i = 0; i < length; i++) hash = (hash ^ (unsigned char)text[i]) * 0x100000001B3u;
    return hash;
}

int32_t gc_wordpiece_lookup(const gc_tokenizer *tokenizer, const char *text, size_t length) {
    size_t mask = tokenizer->slot_count - 1;
    for (size_t slot = hash_bytes(text, length) & mask;; slot = (slot + 1) & mask) {
        int32_t id = tokenizer->slots[slot];
        if (id < 0) return -1;
        const char *entry = tokenizer->vocab[id];
        if (strncmp(entry, text, length) == 0 && entry[length] == '\0') return id;
    }
}

void gc_wordpiece_index(gc_tokenizer *tokenizer, int32_t id) {
    const char *entry = tokenizer->vocab[id];
    size_t mask = tokenizer->slot_count - 1, slot = hash_bytes(entry, strlen(entry)) & mask;
    while (tokenizer->slots[slot] >= 0) slot = (slot + 1) & mask;
    tokenizer->slots[slot] = id;
}

/* A word being split: its UTF-8 bytes behind the continuation prefix, and where each of its
 * characters starts. */
typedef struct word_buffer {
    char *bytes;    /* prefix, then the word */
    size_t *starts; /* [characters + 1]: byte offsets (after the prefix) of each character, then the end */
    size_t capacity;
} word_buffer;

static bool reserve(word_buffer *word, size_t characters, size_t prefix_length) {
    if (characters + 1 <= word->capacity) return true;
    size_t capacity = 2 * (characters + 1);
    char *bytes = realloc(word->bytes, prefix_length + 4 * capacity);
    if (bytes) word->bytes = bytes;
    size_t *starts = realloc(word->starts, capacity * sizeof *starts);
    if (starts) word->starts = starts;
    if (!bytes || !starts) return false;
    word->capacity = capacity;
    return true;
}

static void emit(int32_t id, int32_t *ids, int64_t *count, int64_t limit) {
    if (*count < limit) ids[(*count)++] = id;
}

/* Splits codes[0..n) (one word) into vocabulary pieces, or [UNK]. */
static bool encode_word(const gc_tokenizer *tokenizer, const uint32_t *codes, size_t n, word_buffer *word,
                        int32_t *ids, int64_t *count, int64_t limit) {
    if ((int64_t)n > tokenizer->max_word_chars) {
        emit(tokenizer->unk_id, ids, count, limit);
        return true;
    }
    size_t p = tokenizer->prefix_length;
    if (!reserve(word, n, p)) return false;
    memcpy(word->bytes, tokenizer->prefix, p);
    char *text = word->bytes + p;
    word->starts[0] = 0;
    for (size_t i = 0; i < n; i++) word->starts[i + 1] = word->starts[i] + gc_utf8_encode(codes[i], text + word->starts[i]);
    /* a word with a piece the vocabulary lacks is one [UNK]: its pieces are taken back */
    int64_t first = *count;
    for (size_t start = 0; start < n;) {
        int32_t id = -1;
        size_t end = n;
        for (; end > start; end--) {
            size_t from = word->starts[start], to = word->starts[end];
            if (start == 0) {
                id = gc_wordpiece_lookup(tokenizer, text, to);
            } else { /* a continuation: the prefix goes right before it, over bytes already used */
                memcpy(text + from - p, tokenizer->prefix, p);
                id = gc_wordpiece_lookup(tokenizer, text + from - p, to - from + p);
            }
            if (id >= 0) break;
        }
        if (id < 0) {
            *count = first;
            emit(tokenizer->unk_id, ids, count, limit);
            return true;
        }
        emit(id, ids, count, limit);
        start = end;
    }
    return true;
}

bool gc_wordpiece_encode_text(const gc_tokenizer *tokenizer, const char *text, size_t length, int32_t *ids,
                              int64_t *count, int64_t limit) {
    gc_codes codes = {0};
    gc_bert_normalize(&tokenizer->normalizer, text, length, &codes);
    word_buffer word = {0};
    bool ok = !codes.failed;
    /* the pre-tokeniser: whitespace ends a word, punctuation is a word of its own */
    size_t start = 0;
    for (size_t i = 0; ok && i <= codes.count && *count < limit; i++) {
        bool last = i == codes.count;
        bool space = !last && tokenizer->pre_tokenize && gc_bert_is_whitespace(codes.items[i]);
        bool punctuation = !last && tokenizer->pre_tokenize && gc_bert_is_punctuation(codes.items[i]);
        if (!last && !space && !punctuation) continue;
        if (i > start) ok = encode_word(tokenizer, codes.items + start, i - start, &word, ids, count, limit);
        if (ok && punctuation) ok = encode_word(tokenizer, codes.items + i, 1, &word, ids, count, limit);
        start = i + 1;
    }
    free(codes.items);
    free(word.bytes);
    free(word.starts);
    return ok;
}
