/* UTF-8 decoding and encoding, shared by the JSON reader and the tokenizers. */
#ifndef GC_BASE_UTF8_H
#define GC_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The well-formed UTF-8 sequence at s (at most `available` bytes, available >= 1): its length,
 * with the code point in *code; 0 for an ill-formed one (overlong, a surrogate, past
 * U+10FFFF, truncated, a stray continuation byte). */
size_t gc_utf8_decode(const unsigned char *s, size_t available, uint32_t *code);
/* Writes code (at most U+10FFFF, no surrogate) to out (4 bytes of room); returns the length. */
size_t gc_utf8_encode(uint32_t code, char *out);

#endif
