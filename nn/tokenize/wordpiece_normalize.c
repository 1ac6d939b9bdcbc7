/* The BertNormalizer, character by character: clean text, CJK spacing, NFD + accent
 * stripping, lowercase, in the reference's order. Every step maps one character to zero or
 * more characters on its own, so the whole normaliser is a per-character function (see
 * tests/make_unicode_tables.py, which checks that against the reference for every code
 * point). The one thing it does not do is NFD's canonical reordering of combining marks:
 * with accents stripped nearly all of them are removed anyway (and without stripping, no
 * decomposition is done at all). */
#include <stdlib.h>

#include "nn/tokenize/tokenizer_internal.h"
#include "nn/tokenize/unicode_tables.h"
#include "base/utf8.h"

/* Hangul syllables decompose by arithmetic (Unicode, chapter 3.12), not by table. */
enum { HANGUL_FIRST = 0xAC00, HANGUL_LAST = 0xD7A3, LEADS = 0x1100, VOWELS = 0x1161, TAILS = 0x11A7 };
enum { VOWEL_COUNT = 21, TAIL_COUNT = 28 };

bool gc_unicode_in(const gc_unicode_ranges *set, uint32_t code) {
    int low = 0, high = set->count - 1;
    while (low <= high) {
        int middle = (low + high) / 2;
        if (code < set->ranges[middle].first) high = middle - 1;
        else if (code > set->ranges[middle].last) low = middle + 1;
        else return true;
    }
    return false;
}

const gc_unicode_mapping *gc_unicode_map(const gc_unicode_mappings *mappings, uint32_t code) {
    int low = 0, high = mappings->count - 1;
    while (low <= high) {
        int middle = (low + high) / 2;
        if (code < mappings->entries[middle].code) high = middle - 1;
        else if (code > mappings->entries[middle].code) low = middle + 1;
        else return &mappings->entries[middle];
    }
    return NULL;
}

bool gc_bert_is_whitespace(uint32_t code) { return gc_unicode_in(&gc_unicode_whitespace, code); }
bool gc_bert_is_punctuation(uint32_t code) { return gc_unicode_in(&gc_unicode_punctuation, code); }

void gc_codes_push(gc_codes *codes, uint32_t code) {
    if (codes->failed) return;
    if (codes->count == codes->capacity) {
        size_t capacity = codes->capacity ? 2 * codes->capacity : 64;
        uint32_t *items = realloc(codes->items, capacity * sizeof *items);
        if (!items) {
            codes->failed = true;
            return;
        }
        codes->items = items;
        codes->capacity = capacity;
    }
    codes->items[codes->count++] = code;
}

void gc_codes_append_utf8(gc_codes *codes, const char *text, size_t length) {
    for (size_t at = 0; at < length;) {
        uint32_t code;
        size_t step = gc_utf8_decode((const unsigned char *)text + at, length - at, &code);
        if (!step) code = 0xFFFD, step = 1; /* an invalid byte reads as the replacement character */
        gc_codes_push(codes, code);
        at += step;
    }
}

int gc_unicode_decompose(uint32_t code, uint32_t parts[GC_UNICODE_MAPPING_MAX]) {
    if (code >= HANGUL_FIRST && code <= HANGUL_LAST) {
        uint32_t index = code - HANGUL_FIRST, tail = index % TAIL_COUNT;
        parts[0] = LEADS + index / (VOWEL_COUNT * TAIL_COUNT);
        parts[1] = VOWELS + index % (VOWEL_COUNT * TAIL_COUNT) / TAIL_COUNT;
        parts[2] = TAILS + tail;
        return tail ? 3 : 2;
    }
    const gc_unicode_mapping *mapping = gc_unicode_map(&gc_unicode_decomposition, code);
    if (!mapping) {
        parts[0] = code;
        return 1;
    }
    for (int i = 0; i < mapping->length; i++) parts[i] = mapping->to[i];
    return mapping->length;
}

static void push_lowercase(uint32_t code, gc_codes *out) {
    const gc_unicode_mapping *mapping = gc_unicode_map(&gc_unicode_lowercase, code);
    if (!mapping) {
        gc_codes_push(out, code);
        return;
    }
    for (int i = 0; i < mapping->length; i++) gc_codes_push(out, mapping->to[i]);
}

/* The strip-accents and lowercase steps of one character. */
static void push_folded(const gc_bert_normalizer *normalizer, uint32_t code, gc_codes *out) {
    uint32_t parts[GC_UNICODE_MAPPING_MAX] = {code};
    int count = normalizer->strip_accents ? gc_unicode_decompose(code, parts) : 1;
    for (int i = 0; i < count; i++) {
        if (normalizer->strip_accents && gc_unicode_in(&gc_unicode_nonspacing_mark, parts[i])) continue;
        if (normalizer->lowercase) push_lowercase(parts[i], out);
        else gc_codes_push(out, parts[i]);
    }
}

void gc_bert_normalize(const gc_bert_normalizer *normalizer, const char *text, size_t length, gc_codes *out) {
    const unsigned char *bytes = (const unsigned char *)text;
    for (size_t at = 0; at < length;) {
        uint32_t code;
        size_t step = gc_utf8_decode(bytes + at, length - at, &code);
        if (!step) code = 0xFFFD, step = 1; /* an invalid byte reads as the replacement character */
        at += step;
        if (normalizer->clean_text) {
            if (code == 0xFFFD || gc_unicode_in(&gc_unicode_control, code)) continue;
            if (gc_bert_is_whitespace(code)) code = ' ';
        }
        bool spaced = normalizer->handle_chinese_chars && gc_unicode_in(&gc_unicode_cjk, code);
        if (spaced) gc_codes_push(out, ' ');
        push_folded(normalizer, code, out);
        if (spaced) gc_codes_push(out, ' ');
    }
}
