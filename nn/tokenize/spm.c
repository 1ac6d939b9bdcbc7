/* The SentencePiece-style steps of a BPE tokenizer (Llama-2's, Mistral's), on a text's code
 * points before the model sees them: the normaliser's steps in the file's order (Llama-2's
 * Prepend "▁" and Replace " " by "▁"; NFC) and the pre-tokeniser's changes (Metaspace's
 * replacement of spaces, its prepended "▁" and its split; ByteLevel's prefix space), as the
 * reference (tokenizers 0.19) defines them. */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenize/tokenizer_internal.h"

/* `prefix` before the text: appended, then moved to the front. */
static void prepend(gc_codes *codes, const uint32_t *prefix, size_t count) {
    size_t old = codes->count;
    for (size_t i = 0; i < count; i++) gc_codes_push(codes, prefix[i]);
    if (codes->failed) return;
    memmove(codes->items + count, codes->items, old * sizeof *codes->items);
    memcpy(codes->items, prefix, count * sizeof *codes->items);
}

static bool match_at(const gc_codes *codes, size_t at, const gc_codes *pattern) {
    return codes->count - at >= pattern->count &&
           !memcmp(codes->items + at, pattern->items, pattern->count * sizeof *pattern->items);
}

/* Every occurrence of step->pattern, left to right and not overlapping, by step->text. */
static void replace(gc_codes *codes, const gc_bpe_step *step) {
    gc_codes out = {0};
    for (size_t at = 0; at < codes->count;) {
        if (!match_at(codes, at, &step->pattern)) {
            gc_codes_push(&out, codes->items[at++]);
            continue;
        }
        for (size_t i = 0; i < step->text.count; i++) gc_codes_push(&out, step->text.items[i]);
        at += step->pattern.count;
    }
    free(codes->items);
    *codes = out;
}

void gc_bpe_normalize(const gc_bpe_settings *bpe, gc_codes *codes) {
    for (int i = 0; i < bpe->n_steps && !codes->failed; i++) {
        const gc_bpe_step *step = &bpe->steps[i];
        switch (step->kind) {
        case GC_BPE_STEP_NFC: gc_nfc(codes); break;
        case GC_BPE_STEP_PREPEND:
            if (codes->count) prepend(codes, step->text.items, step->text.count);
            break;
        case GC_BPE_STEP_REPLACE: replace(codes, step); break;
        }
    }
}

void gc_bpe_pre_tokenize(const gc_bpe_settings *bpe, gc_codes *codes, bool at_start) {
    const gc_metaspace *m = &bpe->metaspace;
    if (m->on)
        for (size_t i = 0; i < codes->count; i++)
            if (codes->items[i] == ' ') codes->items[i] = m->replacement;
    uint32_t mark = m->on ? m->replacement : ' ';
    bool wanted = m->on ? m->prepend == GC_METASPACE_ALWAYS || (m->prepend == GC_METASPACE_FIRST && at_start)
                        : bpe->add_prefix_space;
    if (wanted && codes->count && codes->items[0] != mark) prepend(codes, &mark, 1);
}

size_t gc_metaspace_piece_length(uint32_t replacement, const uint32_t *codes, size_t n, size_t at) {
    size_t end = at + 1;
    while (end < n && codes[end] != replacement) end++;
    return end - at;
}
