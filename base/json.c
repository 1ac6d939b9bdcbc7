/* The strict JSON reader of base/json.h: a recursive descent over a byte range, bounded in
 * depth by the caller, that builds a tree of gc_json values. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/utf8.h"

typedef struct parser {
    const unsigned char *text;
    size_t length, at;
    int max_depth;
    bool document; /* the whole grammar (gc_json_parse_document), not only a header's */
    gc_json_error *error;
} parser;

/* Records the problem at `position`; returns NULL so that callers can `return fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void *fail(parser *p, size_t position, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(p->error->message, sizeof p->error->message, fmt, args);
    va_end(args);
    p->error->position = position;
    return NULL;
}

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static void skip_whitespace(parser *p) {
    while (p->at < p->length && (p->text[p->at] == ' ' || p->text[p->at] == '\t' || p->text[p->at] == '\n' ||
                                 p->text[p->at] == '\r'))
        p->at++;
}

/* The byte at the cursor, or -1 at the end of the text. */
static int peek(const parser *p) { return p->at < p->length ? p->text[p->at] : -1; }

static void *fail_unexpected(parser *p, const char *expected) {
    int c = peek(p);
    if (c < 0) return fail(p, p->at, "unexpected end of text, expected %s", expected);
    if (c > 0x20 && c < 0x7f) return fail(p, p->at, "unexpected '%c', expected %s", c, expected);
    return fail(p, p->at, "unexpected byte 0x%02x, expected %s", (unsigned)c, expected);
}

static gc_json *new_value(parser *p, gc_json_type type, size_t position) {
    gc_json *value = calloc(1, sizeof *value);
    if (!value) return fail(p, position, "out of host memory");
    value->type = type;
    value->position = position;
    return value;
}

/* The length of the well-formed UTF-8 sequence at s (at most `available` bytes), or 0. */
static size_t utf8_sequence_length(const unsigned char *s, size_t available) {
    uint32_t code;
    return gc_utf8_decode(s, available, &code);
}

bool gc_json_utf8_valid(const char *text, size_t length) {
    const unsigned char *bytes = (const unsigned char *)text;
    for (size_t at = 0, step; at < length; at += step)
        if (!(step = utf8_sequence_length(bytes + at, length - at))) return false;
    return true;
}

/* Reads the 4 hex digits of a \u escape at `at` (before `end`) into *unit. */
static bool read_hex4(const parser *p, size_t at, size_t end, uint32_t *unit) {
    if (end - at < 4) return false;
    *unit = 0;
    for (size_t i = at; i < at + 4; i++) {
        unsigned char c = p->text[i];
        int digit = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
        if (digit < 0) return false;
        *unit = *unit << 4 | (uint32_t)digit;
    }
    return true;
}

/* Decodes the \u escape (one unit, or a surrogate pair) starting at the backslash at `at`
 * into *code; returns the escape's length in bytes, or 0 after recording the problem. */
static size_t read_unicode_escape(parser *p, size_t at, size_t end, uint32_t *code) {
    uint32_t high, low;
    const char *problem = NULL;
    if (!read_hex4(p, at + 2, end, &high)) problem = "\\u needs 4 hex digits";
    else if (high >= 0xdc00 && high <= 0xdfff) problem = "lone low surrogate";
    else if (high == 0) problem = "\\u0000 in a string (names and metadata are C strings)";
    if (problem) {
        fail(p, at, "%s", problem);
        return 0;
    }
    if (high < 0xd800 || high > 0xdbff) {
        *code = high;
        return 6;
    }
    bool paired = end - at >= 12 && p->text[at + 6] == '\\' && p->text[at + 7] == 'u' &&
                  read_hex4(p, at + 8, end, &low) && low >= 0xdc00 && low <= 0xdfff;
    if (!paired) {
        fail(p, at, "high surrogate \\u%04x without a low surrogate after it", (unsigned)high);
        return 0;
    }
    *code = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
    return 12;
}

static const char *const short_escapes = "\"\"\\\\//b\bf\fn\nr\rt\t"; /* pairs: escape letter, byte */

/* The string whose opening quote is at the cursor, decoded into a new NUL-terminated
 * buffer; the cursor moves past the closing quote. */
static char *parse_string_text(parser *p) {
    size_t start = p->at + 1, end = start;
    while (end < p->length && p->text[end] != '"') end += p->text[end] == '\\' ? 2 : 1;
    if (end >= p->length) return fail(p, p->at, "unterminated string");
    /* Every escape decodes to fewer bytes than it takes, so the raw length is enough. */
    char *out = malloc(end - start + 1);
    if (!out) return fail(p, p->at, "out of host memory");
    size_t used = 0;
    for (size_t at = start; at < end;) {
        unsigned char c = p->text[at];
        size_t step;
        if (c < 0x20) {
            fail(p, at, "control byte 0x%02x in a string (it must be escaped)", (unsigned)c);
            goto error;
        } else if (c != '\\') {
            if (!(step = utf8_sequence_length(p->text + at, end - at))) {
                fail(p, at, "invalid UTF-8 in a string");
                goto error;
            }
            memcpy(out + used, p->text + at, step);
            used += step;
        } else if (p->text[at + 1] == 'u') { /* a backslash is never the last byte before `end` */
            uint32_t code;
            if (!(step = read_unicode_escape(p, at, end, &code))) goto error;
            used += gc_utf8_encode(code, out + used);
        } else {
            const char *escape = NULL;
            for (const char *pair = short_escapes; *pair && !escape; pair += 2)
                if (pair[0] == (char)p->text[at + 1]) escape = pair;
            if (!escape) {
                unsigned char letter = p->text[at + 1];
                fail(p, at, "invalid escape '\\%c'", letter > 0x20 && letter < 0x7f ? letter : '?');
                goto error;
            }
            out[used++] = escape[1];
            step = 2;
        }
        at += step;
    }
    out[used] = '\0';
    p->at = end + 1;
    return out;
error:
    free(out);
    return NULL;
}

static gc_json *parse_integer(parser *p) {
    size_t position = p->at;
    if (p->text[p->at] == '0' && p->at + 1 < p->length && is_digit(p->text[p->at + 1]))
        return fail(p, position, "leading zero in an integer");
    int64_t value = 0;
    for (; p->at < p->length && is_digit(p->text[p->at]); p->at++) {
        int digit = p->text[p->at] - '0';
        if (value > (INT64_MAX - digit) / 10) return fail(p, position, "integer larger than 2^63 - 1");
        value = value * 10 + digit;
    }
    if (peek(p) == '.' || peek(p) == 'e' || peek(p) == 'E')
        return fail(p, p->at, "only integers are accepted (no fraction or exponent)");
    gc_json *number = new_value(p, GC_JSON_INTEGER, position);
    if (number) number->integer = value, number->number = (double)value;
    return number;
}

/* Skips the digits at the cursor; false when there is none. */
static bool skip_digits(parser *p) {
    size_t start = p->at;
    while (p->at < p->length && is_digit(p->text[p->at])) p->at++;
    return p->at > start;
}

/* Any RFC 8259 number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. One without fraction or
 * exponent that fits int64 is a GC_JSON_INTEGER; the rest are doubles (strtod: correctly
 * rounded; the program never sets a locale, so '.' is the decimal point). */
static gc_json *parse_number(parser *p) {
    size_t position = p->at;
    if (peek(p) == '-') p->at++;
    if (peek(p) == '0' && p->at + 1 < p->length && is_digit(p->text[p->at + 1]))
        return fail(p, position, "leading zero in a number");
    if (!skip_digits(p)) return fail_unexpected(p, "a digit");
    bool integral = true;
    if (peek(p) == '.') {
        p->at++, integral = false;
        if (!skip_digits(p)) return fail_unexpected(p, "a digit after '.'");
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->at++, integral = false;
        if (peek(p) == '+' || peek(p) == '-') p->at++;
        if (!skip_digits(p)) return fail_unexpected(p, "a digit in the exponent");
    }
    char digits[64];
    size_t length = p->at - position;
    if (length >= sizeof digits) return fail(p, position, "a number of more than %zu characters", sizeof digits - 1);
    memcpy(digits, p->text + position, length);
    digits[length] = '\0';
    errno = 0;
    long long integer = integral ? strtoll(digits, NULL, 10) : 0;
    bool exact = integral && errno == 0;
    gc_json *number = new_value(p, exact ? GC_JSON_INTEGER : GC_JSON_NUMBER, position);
    if (!number) return NULL;
    number->integer = exact ? integer : 0;
    number->number = exact ? (double)integer : strtod(digits, NULL);
    if (!isfinite(number->number)) {
        free(number);
        return fail(p, position, "number %s is out of the range of a double", digits);
    }
    return number;
}

/* true, false or null at the cursor. */
static gc_json *parse_literal(parser *p) {
    static const struct {
        const char *text;
        gc_json_type type;
        bool value;
    } literals[] = {{"true", GC_JSON_BOOL, true}, {"false", GC_JSON_BOOL, false}, {"null", GC_JSON_NULL, false}};
    for (size_t i = 0; i < sizeof literals / sizeof *literals; i++) {
        size_t length = strlen(literals[i].text);
        if (p->length - p->at < length || memcmp(p->text + p->at, literals[i].text, length) != 0) continue;
        gc_json *value = new_value(p, literals[i].type, p->at);
        if (value) value->boolean = literals[i].value;
        p->at += length;
        return value;
    }
    return fail_unexpected(p, "a value");
}

static int compare_member_keys(const void *a, const void *b) {
    return strcmp((*(gc_json *const *)a)->key, (*(gc_json *const *)b)->key);
}

/* Sorting the members finds a repeated key in n log n, which matters for headers of
 * thousands of tensors. */
static bool keys_unique(parser *p, const gc_json *object) {
    if (object->count < 2) return true;
    gc_json **members = malloc((size_t)object->count * sizeof *members);
    if (!members) {
        fail(p, object->position, "out of host memory");
        return false;
    }
    int n = 0;
    for (gc_json *member = object->first; member; member = member->next) members[n++] = member;
    qsort(members, (size_t)n, sizeof *members, compare_member_keys);
    const gc_json *repeated = NULL;
    for (int i = 1; i < n && !repeated; i++)
        if (strcmp(members[i - 1]->key, members[i]->key) == 0)
            repeated = members[i - 1]->position > members[i]->position ? members[i - 1] : members[i];
    free(members);
    if (repeated) fail(p, repeated->position, "duplicate key \"%.80s\"", repeated->key);
    return !repeated;
}

static gc_json *parse_value(parser *p, int depth);

/* An object or an array (at the cursor's '{' or '['). */
static gc_json *parse_container(parser *p, int depth, gc_json_type type) {
    if (depth >= p->max_depth) return fail(p, p->at, "nesting deeper than %d levels", p->max_depth);
    int close = type == GC_JSON_OBJECT ? '}' : ']';
    gc_json *container = new_value(p, type, p->at);
    if (!container) return NULL;
    gc_json **tail = &container->first;
    p->at++;
    skip_whitespace(p);
    if (peek(p) == close) {
        p->at++;
        return container;
    }
    for (;;) {
        char *key = NULL;
        skip_whitespace(p);
        size_t key_position = p->at;
        if (type == GC_JSON_OBJECT) {
            if (peek(p) != '"') {
                fail_unexpected(p, "a string key");
                goto error;
            }
            if (!(key = parse_string_text(p))) goto error;
            skip_whitespace(p);
            if (peek(p) != ':') {
                free(key);
                fail_unexpected(p, "':' after a key");
                goto error;
            }
            p->at++;
        }
        gc_json *member = NULL;
        if (container->count == INT_MAX) fail(p, p->at, "more than %d members", INT_MAX);
        else member = parse_value(p, depth + 1);
        if (!member) {
            free(key);
            goto error;
        }
        if (key) {
            member->key = key;
            member->position = key_position;
        }
        *tail = member;
        tail = &member->next;
        container->count++;
        skip_whitespace(p);
        if (peek(p) == ',') {
            p->at++;
        } else if (peek(p) == close) {
            p->at++;
            break;
        } else {
            fail_unexpected(p, type == GC_JSON_OBJECT ? "',' or '}'" : "',' or ']'");
            goto error;
        }
    }
    if (type == GC_JSON_OBJECT && !keys_unique(p, container)) goto error;
    return container;
error:
    gc_json_free(container);
    return NULL;
}

static gc_json *parse_value(parser *p, int depth) {
    skip_whitespace(p);
    int c = peek(p);
    if (c == '{') return parse_container(p, depth, GC_JSON_OBJECT);
    if (c == '[') return parse_container(p, depth, GC_JSON_ARRAY);
    if (p->document && (c == '-' || (c >= 0 && is_digit((unsigned char)c)))) return parse_number(p);
    if (p->document && (c == 't' || c == 'f' || c == 'n')) return parse_literal(p);
    if (c >= 0 && is_digit((unsigned char)c)) return parse_integer(p);
    if (c == '-') return fail(p, p->at, "negative numbers are not accepted");
    if (c == '"') {
        gc_json *string = new_value(p, GC_JSON_STRING, p->at);
        if (string && !(string->string = parse_string_text(p))) {
            free(string);
            return NULL;
        }
        return string;
    }
    if (c == 't' || c == 'f' || c == 'n') return fail(p, p->at, "true, false and null are not accepted");
    return fail_unexpected(p, "a value");
}

static gc_json *parse(const char *text, size_t length, int max_depth, bool document, gc_json_error *error) {
    parser p = {(const unsigned char *)text, length, 0, max_depth, document, error};
    gc_json *value = parse_value(&p, 0);
    if (!value) return NULL;
    skip_whitespace(&p);
    if (p.at != length) {
        gc_json_free(value);
        return fail_unexpected(&p, "the end of the text");
    }
    return value;
}

gc_json *gc_json_parse(const char *text, size_t length, int max_depth, gc_json_error *error) {
    return parse(text, length, max_depth, false, error);
}

gc_json *gc_json_parse_document(const char *text, size_t length, int max_depth, gc_json_error *error) {
    return parse(text, length, max_depth, true, error);
}

const gc_json *gc_json_member(const gc_json *object, const char *key) {
    if (!object || object->type != GC_JSON_OBJECT) return NULL;
    for (const gc_json *member = object->first; member; member = member->next)
        if (strcmp(member->key, key) == 0) return member;
    return NULL;
}

const char *gc_json_type_name(gc_json_type type) {
    switch (type) {
    case GC_JSON_OBJECT: return "an object";
    case GC_JSON_ARRAY: return "an array";
    case GC_JSON_STRING: return "a string";
    case GC_JSON_INTEGER: return "an integer";
    case GC_JSON_NUMBER: return "a number";
    case GC_JSON_BOOL: return "true or false";
    case GC_JSON_NULL: return "null";
    }
    return "an unknown JSON type";
}

void gc_json_free(gc_json *value) {
    while (value) { /* siblings in a loop, children by recursion bounded by max_depth */
        gc_json *next = value->next;
        gc_json_free(value->first);
        free(value->key);
        free(value->string);
        free(value);
        value = next;
    }
}
