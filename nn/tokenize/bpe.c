/* The BPE model of GPT-2's, Llama-3's and Qwen's tokenizers (byte-level: a piece's bytes
 * become characters by GPT-2's byte-to-unicode map) and of Llama-2's and Mistral's
 * (SentencePiece's style: a piece's characters are themselves, and one without a token falls
 * back to its UTF-8 bytes' <0xNN> tokens). Each character is a symbol of the vocabulary, and
 * adjacent symbols merge by the rank of their pair in the merges list, lowest rank first and
 * leftmost first among equals, until no pair has a merge. That order is the reference's
 * (tokenizers' Word::merge_all, a priority queue of (rank, position)), kept here with a binary
 * heap so that a long piece costs n log n, not n^2. */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenize/tokenizer_internal.h"
#include "base/utf8.h"

#define EMPTY_PAIR UINT64_MAX

static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t)(uint32_t)left << 32 | (uint32_t)right; }

static size_t pair_slot(uint64_t key, size_t slots) { return (size_t)((key * 0x9E3779B97F4A7C15u) >> 17) & (slots - 1); }

gc_status gc_bpe_merges_init(gc_tokenizer *tokenizer, size_t count) {
    size_t slots = 2;
    while (slots < 2 * count) slots *= 2;
    tokenizer->bpe.merges = malloc(slots * sizeof *tokenizer->bpe.merges);
    if (!tokenizer->bpe.merges) return GC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < slots; i++) tokenizer->bpe.merges[i].pair = EMPTY_PAIR;
    tokenizer->bpe.merge_slots = slots;
    return GC_OK;
}

/* The slot of (left, right): its entry, or the empty slot where it would go. */
static gc_bpe_merge *find_slot(const gc_bpe_settings *bpe, int32_t left, int32_t right) {
    uint64_t key = pair_key(left, right);
    for (size_t slot = pair_slot(key, bpe->merge_slots);; slot = (slot + 1) & (bpe->merge_slots - 1))
        if (bpe->merges[slot].pair == key || bpe->merges[slot].pair == EMPTY_PAIR) return &bpe->merges[slot];
}

bool gc_bpe_merges_add(gc_tokenizer *tokenizer, int32_t left, int32_t right, int32_t rank, int32_t merged) {
    gc_bpe_merge *slot = find_slot(&tokenizer->bpe, left, right);
    if (slot->pair != EMPTY_PAIR) return false; /* a pair listed twice keeps its first rank, as the reference */
    *slot = (gc_bpe_merge){pair_key(left, right), rank, merged};
    return true;
}

static const gc_bpe_merge *merge_of(const gc_bpe_settings *bpe, int32_t left, int32_t right) {
    const gc_bpe_merge *slot = find_slot(bpe, left, right);
    return slot->pair == EMPTY_PAIR ? NULL : slot;
}

/* GPT-2's map: the printable bytes stand for themselves, the others (controls, space, DEL,
 * the non-breaking space, the soft hyphen) for U+0100 onwards in byte order, so that every
 * byte is a visible character. */
static uint32_t byte_character(unsigned char byte) {
    if ((byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE) return byte;
    if (byte <= 0x20) return 0x100 + byte;            /* the 33 controls and the space */
    if (byte <= 0xA0) return 0x100 + 33 + byte - 0x7F; /* DEL, the C1 controls, NBSP: 34 */
    return 0x100 + 67;                                 /* the soft hyphen */
}

/* The heap of candidate merges: (rank, position) ordered, the merged id kept to tell a stale
 * entry (its pair changed since) from a live one. */
static bool before(const gc_bpe_candidate *a, const gc_bpe_candidate *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->position < b->position);
}

static void heap_push(gc_bpe_work *w, gc_bpe_candidate candidate) {
    size_t i = w->heap_count++;
    for (; i > 0 && before(&candidate, &w->heap[(i - 1) / 2]); i = (i - 1) / 2) w->heap[i] = w->heap[(i - 1) / 2];
    w->heap[i] = candidate;
}

static gc_bpe_candidate heap_pop(gc_bpe_work *w) {
    gc_bpe_candidate top = w->heap[0], last = w->heap[--w->heap_count];
    size_t i = 0;
    for (size_t child; (child = 2 * i + 1) < w->heap_count; i = child) {
        if (child + 1 < w->heap_count && before(&w->heap[child + 1], &w->heap[child])) child++;
        if (!before(&w->heap[child], &last)) break;
        w->heap[i] = w->heap[child];
    }
    w->heap[i] = last;
    return top;
}

/* Queues the merge of symbol `at` with the one after it, if their pair has one. */
static void offer(const gc_bpe_settings *bpe, gc_bpe_work *w, int32_t at) {
    int32_t next = at >= 0 ? w->symbols[at].next : -1;
    const gc_bpe_merge *merge = next >= 0 ? merge_of(bpe, w->symbols[at].id, w->symbols[next].id) : NULL;
    if (merge) heap_push(w, (gc_bpe_candidate){merge->rank, at, merge->merged});
}

/* Room for a piece of `characters` characters: symbols, and a heap that each merge pushes at
 * most two entries onto (3n in all). */
static bool reserve(gc_bpe_work *w, size_t characters, size_t bytes) {
    if (characters > w->capacity) {
        size_t capacity = 2 * characters;
        gc_bpe_symbol *symbols = realloc(w->symbols, capacity * sizeof *symbols);
        if (symbols) w->symbols = symbols;
        gc_bpe_candidate *heap = realloc(w->heap, 3 * capacity * sizeof *heap);
        if (heap) w->heap = heap;
        if (!symbols || !heap) return false;
        w->capacity = capacity;
    }
    if (bytes > w->text_capacity) {
        char *text = realloc(w->text, 2 * bytes);
        if (!text) return false;
        w->text = text;
        w->text_capacity = 2 * bytes;
    }
    return true;
}

static void add_symbol(gc_bpe_work *w, int32_t *symbols, int32_t id) {
    w->symbols[*symbols] = (gc_bpe_symbol){id, *symbols - 1, *symbols + 1};
    (*symbols)++;
}

/* The symbol of one character of `length` bytes: its token; else, with byte fallback, its
 * bytes' <0xNN> tokens; else the unknown token, one for a run of such characters with
 * fuse_unk (*unknown: the last symbol is such a run); else nothing, as the reference drops it. */
static void add_character(const gc_tokenizer *tokenizer, gc_bpe_work *w, int32_t *symbols, const char *character,
                          size_t length, bool *unknown) {
    const gc_bpe_settings *bpe = &tokenizer->bpe;
    int32_t id = gc_wordpiece_lookup(tokenizer, character, length);
    bool fused = id < 0 && !bpe->byte_fallback && bpe->fuse_unk && *unknown;
    *unknown = id < 0 && !bpe->byte_fallback && bpe->unk_id >= 0;
    if (id >= 0) add_symbol(w, symbols, id);
    else if (bpe->byte_fallback) /* every byte has its token: the reader checked */
        for (size_t i = 0; i < length; i++) add_symbol(w, symbols, bpe->byte_ids[(unsigned char)character[i]]);
    else if (bpe->unk_id >= 0 && !fused) add_symbol(w, symbols, bpe->unk_id);
}

/* The piece's characters as symbols, and its text as the vocabulary spells it (w->text,
 * `*used` bytes): byte-level, each byte is GPT-2's byte character; otherwise (SentencePiece's
 * style) the piece's UTF-8 characters are themselves. */
static int32_t add_symbols(const gc_tokenizer *tokenizer, const char *piece, size_t length, gc_bpe_work *w,
                           size_t *used) {
    int32_t symbols = 0;
    bool unknown = false;
    *used = 0;
    for (size_t i = 0; i < length;) {
        size_t start = *used, step = 1;
        if (tokenizer->bpe.byte_level) {
            *used += gc_utf8_encode(byte_character((unsigned char)piece[i]), w->text + *used);
        } else { /* the piece is well-formed UTF-8: it was encoded from code points */
            uint32_t code;
            step = gc_utf8_decode((const unsigned char *)piece + i, length - i, &code);
            memcpy(w->text + *used, piece + i, step);
            *used += step;
        }
        add_character(tokenizer, w, &symbols, w->text + start, *used - start, &unknown);
        i += step;
    }
    return symbols;
}

bool gc_bpe_encode_piece(const gc_tokenizer *tokenizer, const char *piece, size_t length, gc_bpe_work *w,
                         int32_t *ids, int64_t *count, int64_t limit) {
    const gc_bpe_settings *bpe = &tokenizer->bpe;
    if (!reserve(w, length, 2 * length + 1)) return false;
    size_t used; /* the piece's text: byte-level, each byte 1 or 2 bytes of UTF-8 */
    int32_t symbols = add_symbols(tokenizer, piece, length, w, &used);
    int32_t whole = bpe->ignore_merges && used ? gc_wordpiece_lookup(tokenizer, w->text, used) : -1;
    if (whole >= 0) { /* Llama-3: a piece in the vocabulary is taken whole, merges or not */
        if (*count < limit) ids[(*count)++] = whole;
        return true;
    }
    if (symbols) w->symbols[symbols - 1].next = -1;
    w->heap_count = 0;
    for (int32_t at = 0; at < symbols; at++) offer(bpe, w, at);
    while (w->heap_count) {
        gc_bpe_candidate top = heap_pop(w);
        gc_bpe_symbol *s = &w->symbols[top.position];
        const gc_bpe_merge *merge = s->id >= 0 && s->next >= 0 ? merge_of(bpe, s->id, w->symbols[s->next].id) : NULL;
        if (!merge || merge->merged != top.merged) continue; /* stale: the pair changed since */
        gc_bpe_symbol *gone = &w->symbols[s->next];
        s->id = top.merged;
        s->next = gone->next;
        if (gone->next >= 0) w->symbols[gone->next].prev = top.position;
        gone->id = -1;
        offer(bpe, w, s->prev);
        offer(bpe, w, top.position);
    }
    for (int32_t at = symbols ? 0 : -1; at >= 0 && *count < limit; at = w->symbols[at].next)
        ids[(*count)++] = w->symbols[at].id;
    return true;
}

void gc_bpe_work_free(gc_bpe_work *w) {
    free(w->symbols);
    free(w->heap);
    free(w->text);
    *w = (gc_bpe_work){0};
}
