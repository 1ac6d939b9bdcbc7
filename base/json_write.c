/* The JSON writer of base/json.h: a growing buffer and serde_json's string escaping. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

void gc_json_append(gc_json_text *text, const char *bytes, size_t length) {
    if (text->failed || length == 0) return;
    if (length > text->capacity - text->length) {
        size_t capacity = text->capacity ? text->capacity : 256;
        while (capacity - text->length < length && capacity <= SIZE_MAX / 2) capacity *= 2;
        char *grown = capacity - text->length >= length ? realloc(text->bytes, capacity) : NULL;
        if (!grown) {
            text->failed = true;
            return;
        }
        text->bytes = grown;
        text->capacity = capacity;
    }
    memcpy(text->bytes + text->length, bytes, length);
    text->length += length;
}

void gc_json_append_string(gc_json_text *text, const char *string) {
    static const char hex[] = "0123456789abcdef";
    gc_json_append(text, "\"", 1);
    const char *run = string; /* the bytes since the last escape, appended in one go */
    for (const char *at = string; *at; at++) {
        unsigned char c = (unsigned char)*at;
        char escape[6] = {'\\', 0};
        size_t length = 2;
        switch (c) {
        case '"': escape[1] = '"'; break;
        case '\\': escape[1] = '\\'; break;
        case '\b': escape[1] = 'b'; break;
        case '\f': escape[1] = 'f'; break;
        case '\n': escape[1] = 'n'; break;
        case '\r': escape[1] = 'r'; break;
        case '\t': escape[1] = 't'; break;
        default:
            if (c >= 0x20) continue;
            memcpy(escape + 1, "u00", 3);
            escape[4] = hex[c >> 4];
            escape[5] = hex[c & 15];
            length = 6;
        }
        gc_json_append(text, run, (size_t)(at - run));
        gc_json_append(text, escape, length);
        run = at + 1;
    }
    gc_json_append(text, run, strlen(run));
    gc_json_append(text, "\"", 1);
}

void gc_json_append_integer(gc_json_text *text, int64_t value) {
    char digits[24];
    int length = snprintf(digits, sizeof digits, "%" PRId64, value);
    gc_json_append(text, digits, (size_t)length);
}

void gc_json_text_free(gc_json_text *text) {
    free(text->bytes);
    *text = (gc_json_text){0};
}
