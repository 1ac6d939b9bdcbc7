/* NFC (Unicode's canonical composition, UAX #15), the normaliser of Qwen's tokenizers: each
 * character decomposed canonically (the WordPiece normaliser's table, Hangul by arithmetic),
 * combining marks put in canonical order, then composed again pair by pair, as the
 * reference's unicode-normalization crate does (tests/make_bpe_tables.py checks these steps
 * against the reference for every code point). */
#include <stdlib.h>

#include "nn/tokenize/tokenizer_internal.h"
#include "nn/tokenize/unicode_tables.h"

enum { HANGUL_FIRST = 0xAC00, HANGUL_LAST = 0xD7A3, LEADS = 0x1100, VOWELS = 0x1161, TAILS = 0x11A7 };
enum { LEAD_COUNT = 19, VOWEL_COUNT = 21, TAIL_COUNT = 28 };

static uint8_t combining_class(uint32_t code) {
    int low = 0, high = gc_unicode_combining.count - 1;
    while (low <= high) {
        int middle = (low + high) / 2;
        const gc_unicode_class_range *range = &gc_unicode_combining.ranges[middle];
        if (code < range->first) high = middle - 1;
        else if (code > range->last) low = middle + 1;
        else return range->value;
    }
    return 0;
}

/* The composite of first and second, or 0 when they do not compose. */
static uint32_t compose(uint32_t first, uint32_t second) {
    if (first >= LEADS && first < LEADS + LEAD_COUNT && second >= VOWELS && second < VOWELS + VOWEL_COUNT)
        return HANGUL_FIRST + ((first - LEADS) * VOWEL_COUNT + (second - VOWELS)) * TAIL_COUNT;
    if (first >= HANGUL_FIRST && first <= HANGUL_LAST && (first - HANGUL_FIRST) % TAIL_COUNT == 0 && second > TAILS &&
        second < TAILS + TAIL_COUNT)
        return first + (second - TAILS);
    int low = 0, high = gc_unicode_canonical_compositions.count - 1;
    while (low <= high) {
        int middle = (low + high) / 2;
        const gc_unicode_composition *entry = &gc_unicode_canonical_compositions.entries[middle];
        if (first < entry->first || (first == entry->first && second < entry->second)) high = middle - 1;
        else if (first > entry->first || second > entry->second) low = middle + 1;
        else return entry->composite;
    }
    return 0;
}

/* Canonical order: within each run of non-zero classes, a stable sort by class. */
static void reorder(uint32_t *codes, size_t count) {
    for (size_t i = 1; i < count; i++) {
        uint8_t class = combining_class(codes[i]);
        for (size_t j = i; class && j > 0 && combining_class(codes[j - 1]) > class; j--) {
            uint32_t swap = codes[j - 1];
            codes[j - 1] = codes[j];
            codes[j] = swap;
        }
    }
}

void gc_nfc(gc_codes *codes) {
    gc_codes decomposed = {0};
    for (size_t i = 0; i < codes->count; i++) {
        uint32_t parts[GC_UNICODE_MAPPING_MAX];
        int count = gc_unicode_decompose(codes->items[i], parts);
        for (int p = 0; p < count; p++) gc_codes_push(&decomposed, parts[p]);
    }
    if (decomposed.failed) {
        free(decomposed.items);
        codes->failed = true;
        return;
    }
    reorder(decomposed.items, decomposed.count);
    /* composing in place: a character is either kept (written at `kept`) or folded into the
     * last starter; a mark between them of a class at least its own blocks it */
    uint32_t *c = decomposed.items;
    size_t kept = decomposed.count ? 1 : 0, starter = 0;
    int last_class = decomposed.count && combining_class(c[0]) ? 256 : 0;
    for (size_t i = 1; i < decomposed.count; i++) {
        int class = combining_class(c[i]);
        uint32_t composite = compose(c[starter], c[i]);
        if (composite && (last_class < class || last_class == 0)) {
            c[starter] = composite;
            continue;
        }
        if (class == 0) starter = kept;
        last_class = class;
        c[kept++] = c[i];
    }
    free(codes->items);
    *codes = (gc_codes){decomposed.items, kept, decomposed.capacity, false};
}
