/* The character classes and mappings of the BERT normaliser and pre-tokeniser, generated from
 * the reference implementation by tests/make_unicode_tables.py into nn/tokenize/unicode_tables.c;
 * those of the byte-level BPE pre-tokenisers and of NFC, by tests/make_bpe_tables.py into
 * nn/tokenize/unicode_bpe_tables.c. */
#ifndef GC_NN_UNICODE_TABLES_H
#define GC_NN_UNICODE_TABLES_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gc_unicode_range {
    uint32_t first, last; /* inclusive */
} gc_unicode_range;

typedef struct gc_unicode_ranges {
    const gc_unicode_range *ranges; /* sorted, disjoint */
    int count;
} gc_unicode_ranges;

/* The longest mapping of one character (a decomposition or a lowercase form). */
#define GC_UNICODE_MAPPING_MAX 4

typedef struct gc_unicode_mapping {
    uint32_t code;
    uint8_t length;
    uint32_t to[GC_UNICODE_MAPPING_MAX];
} gc_unicode_mapping;

typedef struct gc_unicode_mappings {
    const gc_unicode_mapping *entries; /* sorted by code */
    int count;
} gc_unicode_mappings;

extern const gc_unicode_ranges gc_unicode_control;         /* removed by clean_text (\t \n \r excepted) */
extern const gc_unicode_ranges gc_unicode_whitespace;      /* split words; clean_text makes them ' ' */
extern const gc_unicode_ranges gc_unicode_cjk;             /* handle_chinese_chars puts spaces around them */
extern const gc_unicode_ranges gc_unicode_nonspacing_mark; /* strip_accents removes them after NFD */
extern const gc_unicode_ranges gc_unicode_punctuation;     /* a word of their own */
extern const gc_unicode_mappings gc_unicode_decomposition; /* NFD, Hangul syllables excepted */
extern const gc_unicode_mappings gc_unicode_lowercase;

/* Canonical combining classes: ranges of one class each, sorted (a code point in none is 0). */
typedef struct gc_unicode_class_range {
    uint32_t first, last; /* inclusive */
    uint8_t value;
} gc_unicode_class_range;

typedef struct gc_unicode_classes {
    const gc_unicode_class_range *ranges;
    int count;
} gc_unicode_classes;

/* A canonical composition: first followed by second composes into composite. */
typedef struct gc_unicode_composition {
    uint32_t first, second, composite;
} gc_unicode_composition;

typedef struct gc_unicode_compositions {
    const gc_unicode_composition *entries; /* sorted by (first, second) */
    int count;
} gc_unicode_compositions;

/* The regular expressions' classes (Oniguruma's, as the reference's Split uses them). */
extern const gc_unicode_ranges gc_unicode_letter;      /* \p{L} */
extern const gc_unicode_ranges gc_unicode_number;      /* \p{N} */
extern const gc_unicode_ranges gc_unicode_regex_space; /* \s */
extern const gc_unicode_classes gc_unicode_combining;
extern const gc_unicode_compositions gc_unicode_canonical_compositions;

bool gc_unicode_in(const gc_unicode_ranges *set, uint32_t code);
/* The canonical decomposition of one character (NFD's, Hangul syllables by arithmetic) into
 * parts[]; returns how many (at most GC_UNICODE_MAPPING_MAX). */
int gc_unicode_decompose(uint32_t code, uint32_t parts[GC_UNICODE_MAPPING_MAX]);
/* The mapping of `code`, or NULL when it maps to itself. */
const gc_unicode_mapping *gc_unicode_map(const gc_unicode_mappings *mappings, uint32_t code);

#endif
