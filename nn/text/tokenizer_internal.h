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

struct gc_tokenizer {
    bool bytes;                /* the byte-level tokenizer: nothing below is used */
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
};

/* The id of the vocabulary entry spelled by `length` bytes, or -1. */
int32_t gc_wordpiece_lookup(const gc_tokenizer *tokenizer, const char *text, size_t length);
/* Adds entry `id` to the hash (the table has room: slot_count >= 2 vocab_size). */
void gc_wordpiece_index(gc_tokenizer *tokenizer, int32_t id);

/* A growing array of code points. */
typedef struct gc_codes {
    uint32_t *items;
    size_t count, capacity;
    bool failed; /* out of host memory: appends do nothing more */
} gc_codes;

void gc_codes_push(gc_codes *codes, uint32_t code);

/* Appends the normalised form of `length` bytes of UTF-8 text to *out. */
void gc_bert_normalize(const gc_bert_normalizer *normalizer, const char *text, size_t length, gc_codes *out);
/* The pre-tokeniser's classes (nn/text/unicode_tables.h). */
bool gc_bert_is_whitespace(uint32_t code);
bool gc_bert_is_punctuation(uint32_t code);

/* WordPiece over `length` bytes of text with no added token in it: appends ids to
 * ids[*count ..] while *count < limit. False when host memory ran out. */
bool gc_wordpiece_encode_text(const gc_tokenizer *tokenizer, const char *text, size_t length, int32_t *ids,
                              int64_t *count, int64_t limit);

#endif
