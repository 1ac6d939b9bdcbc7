/* A small, strict JSON reader and writer. Two grammars:
 *  - gc_json_parse: exactly what a safetensors header holds: objects, strings,
 *    non-negative integers and arrays; true, false, null and other numbers are rejected;
 *  - gc_json_parse_document: all of RFC 8259 (as config.json and tokenizer.json need):
 *    true, false, null, and any number (integers that fit int64 stay exact).
 * Both reject invalid UTF-8, lone surrogates, U+0000 in strings, duplicate keys and
 * nesting deeper than the caller allows, with the byte position of the problem, because
 * such files are outside input and the reader must not guess. */
#ifndef GC_BASE_JSON_H
#define GC_BASE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gc_json_type {
    GC_JSON_OBJECT,
    GC_JSON_ARRAY,
    GC_JSON_STRING,
    GC_JSON_INTEGER, /* no fraction or exponent, within int64 */
    GC_JSON_NUMBER,  /* any other number (gc_json_parse_document only) */
    GC_JSON_BOOL,    /* true or false (gc_json_parse_document only) */
    GC_JSON_NULL     /* (gc_json_parse_document only) */
} gc_json_type;

/* One value of a parsed document; an object's or an array's members are a list in the
 * order of the text. */
typedef struct gc_json {
    gc_json_type type;
    size_t position;       /* byte offset in the text (of the key, for an object's member) */
    char *key;             /* the member name inside an object, else NULL */
    char *string;          /* GC_JSON_STRING: UTF-8, NUL-terminated (U+0000 is rejected) */
    int64_t integer;       /* GC_JSON_INTEGER: 0 .. INT64_MAX (gc_json_parse), INT64_MIN .. (document) */
    double number;         /* GC_JSON_INTEGER, GC_JSON_NUMBER: the value (rounded to a double) */
    bool boolean;          /* GC_JSON_BOOL */
    int count;             /* GC_JSON_OBJECT, GC_JSON_ARRAY: number of members */
    struct gc_json *first; /* ... and the first of them */
    struct gc_json *next;  /* the next member of the enclosing object or array */
} gc_json;

typedef struct gc_json_error {
    size_t position; /* byte offset of the problem in the text */
    char message[160];
} gc_json_error;

/* Parses `length` bytes of text (no NUL terminator needed) holding one value surrounded
 * by optional whitespace; objects and arrays nest at most max_depth deep. Returns the
 * document, or NULL with *error filled in (also when host memory ran out). */
gc_json *gc_json_parse(const char *text, size_t length, int max_depth, gc_json_error *error);
/* The same for the whole JSON grammar (see above). */
gc_json *gc_json_parse_document(const char *text, size_t length, int max_depth, gc_json_error *error);
void gc_json_free(gc_json *value);

/* The member of `object` named `key`, or NULL (also when `object` is NULL or no object). */
const gc_json *gc_json_member(const gc_json *object, const char *key);
/* A JSON type's name for messages: "an object", "a string", "true or false", ... */
const char *gc_json_type_name(gc_json_type type);

/* True when `length` bytes are well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing past U+10FFFF). */
bool gc_json_utf8_valid(const char *text, size_t length);

/* A growing text buffer for writing JSON; `failed` records an allocation failure, after
 * which appends do nothing, so a writer checks once at the end. */
typedef struct gc_json_text {
    char *bytes;
    size_t length, capacity;
    bool failed;
} gc_json_text;

void gc_json_append(gc_json_text *text, const char *bytes, size_t length);
/* `string` (UTF-8) quoted and escaped as serde_json escapes it, so that what we write is
 * byte-identical to the reference implementation's output. */
void gc_json_append_string(gc_json_text *text, const char *string);
void gc_json_append_integer(gc_json_text *text, int64_t value);
void gc_json_text_free(gc_json_text *text);

#endif
