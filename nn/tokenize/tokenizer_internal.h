/* What the tokenizer's files share: the tokenizer itself and the steps of WordPiece. */
#ifndef GC_NN_TOKENIZER_INTERNAL_H
#define GC_NN_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/tokenizer.h"

/* The special tokens a template may put before and after a text (BERT: 1 and 1). */
#define GC_TEMPLATE_MAX 4

/* A token written literally in a text ("[CLS]"), matched before normalisation. */
typedef struct gc_added_token {
    char *content;
    size_t length;
    int32_t id;
} gc_added_token;

/* The BertNormalizer's switches (all false when tokenizer.json has no normaliser). */
typedef struct gc_bert_normalizer {
    bool clean_text, handle_chinese_chars, strip_accents, lowercase;
} gc_bert_normalizer;

/* A growing array of code points. */
typedef struct gc_codes {
    uint32_t *items;
    size_t count, capacity;
    bool failed; /* out of host memory: appends do nothing more */
} gc_codes;

void gc_codes_push(gc_codes *codes, uint32_t code);
/* Appends the code points of `length` bytes of UTF-8, an ill-formed byte as U+FFFD. */
void gc_codes_append_utf8(gc_codes *codes, const char *text, size_t length);

/* Byte-level BPE (bpe.c, bpe_split.c): the pre-tokeniser's split of a text into pieces. */
typedef enum gc_bpe_split {
    GC_BPE_SPLIT_NONE,   /* the text is one piece */
    GC_BPE_SPLIT_GPT2,   /* ByteLevel's own regex (use_regex) */
    GC_BPE_SPLIT_QWEN2,  /* Qwen2's Split regex: single digits */
    GC_BPE_SPLIT_LLAMA3  /* Llama-3's: runs of up to three digits */
} gc_bpe_split;

/* A merge of the hash: the pair (left << 32 | right, UINT64_MAX for an empty slot), its
 * rank in the merges list and the id of the merged token. */
typedef struct gc_bpe_merge {
    uint64_t pair;
    int32_t rank, merged;
} gc_bpe_merge;

/* A step of a BPE tokenizer's normaliser (spm.c), applied in the file's order. */
typedef enum gc_bpe_step_kind {
    GC_BPE_STEP_NFC,
    GC_BPE_STEP_PREPEND, /* `text` before a text that is not empty (Llama-2's "▁") */
    GC_BPE_STEP_REPLACE  /* every `pattern` (not empty), left to right, by `text` (" " by "▁") */
} gc_bpe_step_kind;
typedef struct gc_bpe_step {
    gc_bpe_step_kind kind;
    gc_codes pattern, text;
} gc_bpe_step;

/* SentencePiece's Metaspace pre-tokeniser: spaces become `replacement` ("▁"), which is put
 * before a text that does not start with one (always, only before the start of the whole
 * text, or never); with `split`, a piece starts at each replacement. */
typedef enum gc_metaspace_prepend { GC_METASPACE_NEVER, GC_METASPACE_FIRST, GC_METASPACE_ALWAYS } gc_metaspace_prepend;
typedef struct gc_metaspace {
    bool on, split;
    uint32_t replacement;
    gc_metaspace_prepend prepend;
} gc_metaspace;

typedef struct gc_bpe_settings {
    gc_bpe_merge *merges;  /* [merge_slots]: open-addressing hash of pairs */
    size_t merge_slots;    /* a power of two, at least twice the merges */
    int32_t unk_id;        /* -1: a character without a token is dropped, as the reference does */
    bool fuse_unk;         /* a run of characters without a token is one unk_id */
    bool byte_fallback;    /* a character without a token is its UTF-8 bytes' tokens, byte_ids */
    int32_t byte_ids[256]; /* the ids of "<0x00>" .. "<0xFF>" (byte_fallback) */
    bool ignore_merges;    /* a piece in the vocabulary is taken whole (Llama-3) */
    gc_bpe_step *steps;    /* [n_steps]: the normaliser */
    int n_steps;
    bool byte_level;       /* ByteLevel: a piece's bytes are GPT-2's byte characters; else the
                              piece's characters are the model's symbols (SentencePiece's) */
    bool add_prefix_space; /* ByteLevel's: a space before a text that does not start with one */
    gc_metaspace metaspace;
    gc_bpe_split split;    /* ByteLevel's split (Metaspace has its own) */
} gc_bpe_settings;

struct gc_tokenizer {
    bool bytes;                /* the byte-level tokenizer: nothing below is used */
    bool bpe_model;            /* BPE (byte-level or SentencePiece-style): `bpe` below, not WordPiece's fields */
    char **vocab;              /* [vocab_size]: the text of each id */
    int64_t vocab_size;
    int32_t *slots;            /* [slot_count]: open-addressing hash of vocab texts -> id, -1 empty */
    size_t slot_count;         /* a power of two, at least twice vocab_size */
    int32_t unk_id, pad_id;
    char *prefix;              /* continuing_subword_prefix, "##" */
    size_t prefix_length;
    int64_t max_word_chars;    /* max_input_chars_per_word */
    gc_bert_normalizer normalizer;
    bool pre_tokenize;         /* the BertPreTokenizer (else the normalised text is one word) */
    int32_t before[GC_TEMPLATE_MAX], after[GC_TEMPLATE_MAX]; /* the template's special tokens */
    int n_before, n_after;
    gc_added_token *added;     /* [n_added] */
    int n_added;
    gc_bpe_settings bpe;
};

/* The id of the vocabulary entry spelled by `length` bytes, or -1. */
int32_t gc_wordpiece_lookup(const gc_tokenizer *tokenizer, const char *text, size_t length);
/* Adds entry `id` to the hash (the table has room: slot_count >= 2 vocab_size). */
void gc_wordpiece_index(gc_tokenizer *tokenizer, int32_t id);

/* Appends the normalised form of `length` bytes of UTF-8 text to *out. */
void gc_bert_normalize(const gc_bert_normalizer *normalizer, const char *text, size_t length, gc_codes *out);
/* The pre-tokeniser's classes (nn/tokenize/unicode_tables.h). */
bool gc_bert_is_whitespace(uint32_t code);
bool gc_bert_is_punctuation(uint32_t code);

/* WordPiece over `length` bytes of text with no added token in it: appends ids to
 * ids[*count ..] while *count < limit. False when host memory ran out. */
bool gc_wordpiece_encode_text(const gc_tokenizer *tokenizer, const char *text, size_t length, int32_t *ids,
                              int64_t *count, int64_t limit);

/* NFC of the code points, in place (codes->failed when host memory ran out). */
void gc_nfc(gc_codes *codes);

/* --- BPE --- */
/* The merges hash, with room for `count` merges. */
gc_status gc_bpe_merges_init(gc_tokenizer *tokenizer, size_t count);
/* Adds merge number `rank` of the pair (left, right) into `merged`; false when the pair is
 * there already (its first rank stays). */
bool gc_bpe_merges_add(gc_tokenizer *tokenizer, int32_t left, int32_t right, int32_t rank, int32_t merged);

/* A symbol of a piece being merged: its token, and its neighbours (-1: none). */
typedef struct gc_bpe_symbol {
    int32_t id, prev, next;
} gc_bpe_symbol;
typedef struct gc_bpe_candidate {
    int32_t rank, position, merged;
} gc_bpe_candidate;
/* The buffers a text's pieces reuse. */
typedef struct gc_bpe_work {
    gc_bpe_symbol *symbols;  /* [capacity] */
    gc_bpe_candidate *heap;  /* [3 capacity] */
    size_t capacity, heap_count;
    char *text;              /* the piece's characters, UTF-8 */
    size_t text_capacity;
} gc_bpe_work;
void gc_bpe_work_free(gc_bpe_work *work);

/* One piece of `length` bytes through the model: appends ids to ids[*count ..] while
 * *count < limit. False when host memory ran out. */
bool gc_bpe_encode_piece(const gc_tokenizer *tokenizer, const char *piece, size_t length, gc_bpe_work *work,
                         int32_t *ids, int64_t *count, int64_t limit);
/* The length of the pre-tokeniser's piece that starts at codes[at] (at < n). */
size_t gc_bpe_piece_length(gc_bpe_split split, const uint32_t *codes, size_t n, size_t at);
/* A text with no added token in it through the normaliser, the pre-tokeniser and the model;
 * `at_start`: the text starts the whole text (Metaspace's "first"). */
bool gc_bpe_encode_text(const gc_tokenizer *tokenizer, const char *text, size_t length, bool at_start, int32_t *ids,
                        int64_t *count, int64_t limit);

/* --- SentencePiece-style steps (spm.c) --- */
/* The normaliser's steps in order (codes->failed when host memory ran out). */
void gc_bpe_normalize(const gc_bpe_settings *bpe, gc_codes *codes);
/* The pre-tokeniser's changes to the text: Metaspace's replacement of spaces and its
 * prepended replacement, or ByteLevel's prefix space. */
void gc_bpe_pre_tokenize(const gc_bpe_settings *bpe, gc_codes *codes, bool at_start);
/* The length of Metaspace's split piece that starts at codes[at] (at < n): up to the next
 * `replacement` after codes[at]. */
size_t gc_metaspace_piece_length(uint32_t replacement, const uint32_t *codes, size_t n, size_t at);

#endif
