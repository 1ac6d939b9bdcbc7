/* UTF-8 (see utf8.h), by RFC 3629. */
#include "base/utf8.h"

size_t gc_utf8_decode(const unsigned char *s, size_t available, uint32_t *code) {
    unsigned char lead = s[0];
    if (lead < 0x80) {
        *code = lead;
        return 1;
    }
    size_t length;
    uint32_t value, smallest;
    if ((lead & 0xe0) == 0xc0) length = 2, value = lead & 0x1fu, smallest = 0x80;
    else if ((lead & 0xf0) == 0xe0) length = 3, value = lead & 0x0fu, smallest = 0x800;
    else if ((lead & 0xf8) == 0xf0) length = 4, value = lead & 0x07u, smallest = 0x10000;
    else return 0;
    if (length > available) return 0;
    for (size_t i = 1; i < length; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        value = value << 6 | (s[i] & 0x3fu);
    }
    int surrogate = value >= 0xd800 && value <= 0xdfff;
    if (value < smallest || value > 0x10ffff || surrogate) return 0;
    *code = value;
    return length;
}

size_t gc_utf8_encode(uint32_t code, char *out) {
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xc0 | code >> 6);
        out[1] = (char)(0x80 | (code & 0x3f));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xe0 | code >> 12);
        out[1] = (char)(0x80 | (code >> 6 & 0x3f));
        out[2] = (char)(0x80 | (code & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | code >> 18);
    out[1] = (char)(0x80 | (code >> 12 & 0x3f));
    out[2] = (char)(0x80 | (code >> 6 & 0x3f));
    out[3] = (char)(0x80 | (code & 0x3f));
    return 4;
}
