/* The character classes and mappings of the BERT normaliser and pre-tokeniser, generated from
 * the reference implementation by tests/make_unicode_tables.py into nn/text/unicode_tables.c. */
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

bool gc_unicode_in(const gc_unicode_ranges *set, uint32_t code);
/* The mapping of `code`, or NULL when it maps to itself. */
const gc_unicode_mapping *gc_unicode_map(const gc_unicode_mappings *mappings, uint32_t code);

#endif
