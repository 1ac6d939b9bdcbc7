/* The BPE pipeline of one text between added tokens: the normaliser's steps and the
 * pre-tokeniser's changes (spm.c), its split into pieces, and each piece to the model (bpe.c).
 *
 * The splits are the regular expressions of GPT-2's ByteLevel pre-tokeniser,
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * and of Qwen2's Split (Llama-3's is the same with \p{N}{1,3} for \p{N}),
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *     \s*[\r\n]+|\s+(?!\S)|\s+
 * written out by hand, alternative by alternative in their order, the first that matches at
 * a position taking the piece (what a backtracking engine does with them): no regular
 * expression library. The classes \p{L}, \p{N} and \s are the reference's own
 * (nn/tokenize/unicode_tables.h). */
#include <stdlib.h>

#include "nn/tokenize/tokenizer_internal.h"
#include "nn/tokenize/unicode_tables.h"
#include "base/utf8.h"

static bool letter(uint32_t c) { return gc_unicode_in(&gc_unicode_letter, c); }
static bool number(uint32_t c) { return gc_unicode_in(&gc_unicode_number, c); }
static bool space(uint32_t c) { return gc_unicode_in(&gc_unicode_regex_space, c); }
static bool newline(uint32_t c) { return c == '\r' || c == '\n'; }
static bool other(uint32_t c) { return !space(c) && !letter(c) && !number(c); }

/* 's 't 're 've 'm 'll 'd at codes[at] ('\''), ignoring case (Oniguruma's folding: the long
 * s folds to s) when `fold`: the piece's length, or 0. */
static size_t contraction(const uint32_t *c, size_t n, size_t at, bool fold) {
    static const char *const endings[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (int e = 0; e < 7; e++) {
        size_t length = 0;
        for (const char *want = endings[e]; *want; want++, length++) {
            uint32_t got = at + 1 + length < n ? c[at + 1 + length] : 0;
            bool same = got == (uint32_t)*want ||
                        (fold && (got == (uint32_t)*want - 32 || (*want == 's' && got == 0x17F)));
            if (!same) break;
        }
        if (!endings[e][length]) return 1 + length;
    }
    return 0;
}

/* The end of the run of characters of `class` from codes[at] (at itself when there is none). */
static size_t run(const uint32_t *c, size_t n, size_t at, bool (*class)(uint32_t)) {
    while (at < n && class(c[at])) at++;
    return at;
}

/* \s+(?!\S) then \s+ at a whitespace character: the run, less its last character when a
 * non-space follows it and something is left. */
static size_t whitespace(const uint32_t *c, size_t n, size_t at) {
    size_t end = run(c, n, at, space);
    return end < n && end - at >= 2 ? end - 1 - at : end - at;
}

static size_t gpt2_piece(const uint32_t *c, size_t n, size_t at) {
    size_t length = c[at] == '\'' ? contraction(c, n, at, false) : 0;
    if (length) return length;
    size_t start = c[at] == ' ' && at + 1 < n ? at + 1 : at; /* the optional space, tried first */
    bool (*classes[3])(uint32_t) = {letter, number, other};
    for (int k = 0; k < 3; k++) {
        if (classes[k](c[start])) return run(c, n, start, classes[k]) - at;
        if (start > at && classes[k](c[at])) return run(c, n, at, classes[k]) - at;
    }
    return whitespace(c, n, at);
}

/* [^\r\n\p{L}\p{N}] */
static bool letter_prefix(uint32_t c) { return !newline(c) && !letter(c) && !number(c); }

static size_t qwen2_piece(const uint32_t *c, size_t n, size_t at, size_t max_digits) {
    size_t length = c[at] == '\'' ? contraction(c, n, at, true) : 0;
    if (length) return length;
    if (letter_prefix(c[at]) && at + 1 < n && letter(c[at + 1])) return run(c, n, at + 1, letter) - at;
    if (letter(c[at])) return run(c, n, at, letter) - at;
    if (number(c[at])) {
        size_t end = at;
        while (end < n && end - at < max_digits && number(c[end])) end++;
        return end - at;
    }
    size_t start = c[at] == ' ' && at + 1 < n && other(c[at + 1]) ? at + 1 : at;
    if (other(c[start])) return run(c, n, run(c, n, start, other), newline) - at;
    /* \s*[\r\n]+: the whitespace run up to its last line break */
    size_t end = run(c, n, at, space), last = end;
    while (last > at && !newline(c[last - 1])) last--;
    return last > at ? last - at : whitespace(c, n, at);
}

size_t gc_bpe_piece_length(gc_bpe_split split, const uint32_t *c, size_t n, size_t at) {
    switch (split) {
    case GC_BPE_SPLIT_GPT2: return gpt2_piece(c, n, at);
    case GC_BPE_SPLIT_QWEN2: return qwen2_piece(c, n, at, 1);
    case GC_BPE_SPLIT_LLAMA3: return qwen2_piece(c, n, at, 3);
    case GC_BPE_SPLIT_NONE: break;
    }
    return n - at;
}

bool gc_bpe_encode_text(const gc_tokenizer *tokenizer, const char *text, size_t length, bool at_start, int32_t *ids,
                        int64_t *count, int64_t limit) {
    const gc_bpe_settings *bpe = &tokenizer->bpe;
    gc_codes codes = {0};
    gc_codes_append_utf8(&codes, text, length);
    gc_bpe_normalize(bpe, &codes);
    gc_bpe_pre_tokenize(bpe, &codes, at_start);
    gc_bpe_work work = {0};
    char *bytes = malloc(4 * codes.count + 1);
    bool ok = !codes.failed && bytes;
    for (size_t at = 0; ok && at < codes.count && *count < limit;) {
        size_t end = at + (bpe->metaspace.split
                               ? gc_metaspace_piece_length(bpe->metaspace.replacement, codes.items, codes.count, at)
                               : gc_bpe_piece_length(bpe->split, codes.items, codes.count, at));
        size_t used = 0;
        for (size_t i = at; i < end; i++) used += gc_utf8_encode(codes.items[i], bytes + used);
        ok = gc_bpe_encode_piece(tokenizer, bytes, used, &work, ids, count, limit);
        at = end;
    }
    gc_bpe_work_free(&work);
    free(bytes);
    free(codes.items);
    return ok;
}
