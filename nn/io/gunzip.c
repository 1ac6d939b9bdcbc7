/* gzip's DEFLATE decoder (see gunzip.h). A stream is a series of blocks: stored (raw bytes),
 * or Huffman-coded with the fixed codes or with codes the block describes first. Symbols are
 * literals, the end of the block, or a (length, distance) copy from the last 32 KiB of output.
 * Codes are canonical, so a code is decoded from the count of codes of each length alone, one
 * bit at a time: slower than a table, but short and easy to check. */
#include "gunzip.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BITS 15       /* the longest Huffman code */
#define MAX_LITLEN 288    /* literal/length codes in a code description */
#define MAX_DIST 30       /* distance codes */
#define WINDOW (32 * 1024)

typedef struct inflater {
    const uint8_t *in;
    size_t size, position; /* in bytes */
    uint32_t bits;         /* bits read but not used, the next one lowest */
    int bit_count;
    char *out;
    size_t out_size, capacity, limit;
    const char *problem; /* set once, at the first error */
} inflater;

typedef struct huffman {
    int16_t count[MAX_BITS + 1]; /* codes of each length */
    int16_t symbol[MAX_LITLEN];  /* the symbols in canonical order */
} huffman;

static bool fail(inflater *s, const char *problem) {
    if (!s->problem) s->problem = problem;
    return false;
}

/* `need` bits (at most 16), lowest first, or -1 past the input's end. */
static int32_t bits(inflater *s, int need) {
    while (s->bit_count < need) {
        if (s->position == s->size) {
            fail(s, "the compressed data end early");
            return -1;
        }
        s->bits |= (uint32_t)s->in[s->position++] << s->bit_count;
        s->bit_count += 8;
    }
    int32_t value = (int32_t)(s->bits & ((1u << need) - 1));
    s->bits >>= need;
    s->bit_count -= need;
    return value;
}

static bool emit(inflater *s, char byte) {
    if (s->out_size == s->limit) return fail(s, "the data are larger than the limit");
    if (s->out_size == s->capacity) {
        size_t capacity = s->capacity ? 2 * s->capacity : 4096;
        if (capacity > s->limit) capacity = s->limit;
        char *grown = realloc(s->out, capacity + 1); /* + 1: the NUL the caller gets */
        if (!grown) gc_fatal("gunzip: out of host memory for %zu bytes", capacity);
        s->out = grown;
        s->capacity = capacity;
    }
    s->out[s->out_size++] = byte;
    return true;
}

/* A stored block: LEN, its complement, then LEN raw bytes (from a byte boundary). */
static bool stored(inflater *s) {
    s->bits = 0;
    s->bit_count = 0;
    if (s->size - s->position < 4) return fail(s, "a stored block's length is cut off");
    const uint8_t *p = s->in + s->position;
    unsigned length = p[0] | (unsigned)p[1] << 8, complement = p[2] | (unsigned)p[3] << 8;
    s->position += 4;
    if (length != (~complement & 0xffffu)) return fail(s, "a stored block's length does not match its complement");
    if (s->size - s->position < length) return fail(s, "a stored block is cut off");
    for (unsigned i = 0; i < length; i++)
        if (!emit(s, (char)s->in[s->position + i])) return false;
    s->position += length;
    return true;
}

/* The canonical code of lengths[0, n): false when a length over-subscribes the code space;
 * an incomplete code is allowed (only a code with a single symbol needs it, and decoding stops
 * at a missing code anyway). */
static bool build(huffman *h, const uint8_t *lengths, int n) {
    memset(h->count, 0, sizeof h->count);
    for (int i = 0; i < n; i++) h->count[lengths[i]]++;
    int left = 1;
    for (int len = 1; len <= MAX_BITS; len++) {
        left = 2 * left - h->count[len];
        if (left < 0) return false;
    }
    int16_t offsets[MAX_BITS + 1] = {0};
    for (int len = 1; len < MAX_BITS; len++) offsets[len + 1] = (int16_t)(offsets[len] + h->count[len]);
    for (int i = 0; i < n; i++)
        if (lengths[i]) h->symbol[offsets[lengths[i]]++] = (int16_t)i;
    return true;
}

/* The next symbol of code h, read one bit at a time (codes are sent most significant bit first). */
static int decode(inflater *s, const huffman *h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= MAX_BITS; len++) {
        int32_t bit = bits(s, 1);
        if (bit < 0) return -1;
        code |= bit;
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    fail(s, "a code that the block's Huffman code does not have");
    return -1;
}

static const uint16_t length_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                         31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t length_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                         2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                       193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/* A Huffman-coded block's symbols, up to its end code (256). */
static bool codes(inflater *s, const huffman *litlen, const huffman *dist) {
    for (;;) {
        int symbol = decode(s, litlen);
        if (symbol < 0) return false;
        if (symbol < 256) {
            if (!emit(s, (char)symbol)) return false;
            continue;
        }
        if (symbol == 256) return true;
        symbol -= 257;
        if (symbol >= 29) return fail(s, "a length code out of range");
        int32_t extra = bits(s, length_extra[symbol]);
        int d = decode(s, dist);
        if (extra < 0 || d < 0) return false;
        if (d >= 30) return fail(s, "a distance code out of range");
        int32_t dist_bits = bits(s, dist_extra[d]);
        if (dist_bits < 0) return false;
        size_t length = length_base[symbol] + (size_t)extra, distance = dist_base[d] + (size_t)dist_bits;
        if (distance > s->out_size) return fail(s, "a distance reaching before the start of the data");
        for (size_t i = 0; i < length; i++)
            if (!emit(s, s->out[s->out_size - distance])) return false;
    }
}

/* A block with RFC 1951's fixed codes (3.2.6), built here each time: a few hundred steps, and
 * no state shared between threads. */
static bool fixed(inflater *s) {
    huffman litlen, dist;
    uint8_t lengths[MAX_LITLEN];
    for (int i = 0; i < MAX_LITLEN; i++) lengths[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
    build(&litlen, lengths, MAX_LITLEN);
    memset(lengths, 5, MAX_DIST);
    build(&dist, lengths, MAX_DIST);
    return codes(s, &litlen, &dist);
}

/* A block with its own codes: their lengths, themselves Huffman-coded (RFC 1951 3.2.7). */
static bool dynamic(inflater *s) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int32_t nlen = bits(s, 5), ndist = bits(s, 5), ncode = bits(s, 4);
    if (nlen < 0 || ndist < 0 || ncode < 0) return false;
    nlen += 257, ndist += 1, ncode += 4;
    if (nlen > 286 || ndist > MAX_DIST) return fail(s, "a block with too many codes");
    uint8_t lengths[MAX_LITLEN + MAX_DIST] = {0};
    for (int i = 0; i < ncode; i++) {
        int32_t length = bits(s, 3);
        if (length < 0) return false;
        lengths[order[i]] = (uint8_t)length;
    }
    huffman lencode, litlen, dist;
    if (!build(&lencode, lengths, 19)) return fail(s, "a block's code-length code is over-subscribed");
    memset(lengths, 0, 19);
    for (int i = 0; i < nlen + ndist;) {
        int symbol = decode(s, &lencode);
        if (symbol < 0) return false;
        if (symbol < 16) {
            lengths[i++] = (uint8_t)symbol;
            continue;
        }
        int repeat, value = 0;
        if (symbol == 16) {
            if (i == 0) return fail(s, "a repeated code length with nothing before it");
            value = lengths[i - 1];
            repeat = 3 + bits(s, 2);
        } else {
            repeat = symbol == 17 ? 3 + bits(s, 3) : 11 + bits(s, 7);
        }
        if (s->problem) return false;
        if (i + repeat > nlen + ndist) return fail(s, "code lengths past the block's count");
        while (repeat--) lengths[i++] = (uint8_t)value;
    }
    if (lengths[256] == 0) return fail(s, "a block without an end code");
    if (!build(&litlen, lengths, nlen) || !build(&dist, lengths + nlen, ndist))
        return fail(s, "a block's Huffman code is over-subscribed");
    return codes(s, &litlen, &dist);
}

/* One DEFLATE stream from s->position: blocks up to the one marked last. */
static bool inflate(inflater *s) {
    int32_t last;
    do {
        last = bits(s, 1);
        int32_t type = bits(s, 2);
        if (last < 0 || type < 0) return false;
        bool ok = type == 0 ? stored(s) : type == 1 ? fixed(s) : type == 2 ? dynamic(s) : fail(s, "a block of type 3");
        if (!ok) return false;
    } while (!last);
    s->bits = 0; /* the rest of the last byte is padding */
    s->bit_count = 0;
    return true;
}

uint32_t gc_crc32(uint32_t crc, const uint8_t *data, size_t size) {
    crc = ~crc;
    for (size_t i = 0; i < size; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint32_t le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Skips a NUL-terminated header field. */
static bool skip_string(inflater *s) {
    while (s->position < s->size)
        if (s->in[s->position++] == 0) return true;
    return fail(s, "the header is cut off");
}

/* One member: its header (RFC 1952 2.3), the DEFLATE stream, CRC-32 and length. */
static bool member(inflater *s) {
    enum { FHCRC = 2, FEXTRA = 4, FNAME = 8, FCOMMENT = 16 };
    if (s->size - s->position < 10) return fail(s, "the header is cut off");
    const uint8_t *h = s->in + s->position;
    if (h[0] != 0x1f || h[1] != 0x8b) return fail(s, "not gzip (no 1f 8b at its start)");
    if (h[2] != 8) return fail(s, "a compression method other than DEFLATE");
    if (h[3] & 0xe0) return fail(s, "reserved header flags set");
    uint8_t flags = h[3];
    s->position += 10;
    if (flags & FEXTRA) {
        if (s->size - s->position < 2) return fail(s, "the header is cut off");
        size_t extra = s->in[s->position] | (size_t)s->in[s->position + 1] << 8;
        s->position += 2;
        if (s->size - s->position < extra) return fail(s, "the header is cut off");
        s->position += extra;
    }
    if ((flags & FNAME) && !skip_string(s)) return false;
    if ((flags & FCOMMENT) && !skip_string(s)) return false;
    if (flags & FHCRC) {
        if (s->size - s->position < 2) return fail(s, "the header is cut off");
        s->position += 2;
    }
    size_t start = s->out_size;
    if (!inflate(s)) return false;
    if (s->size - s->position < 8) return fail(s, "the trailer is cut off");
    const uint8_t *t = s->in + s->position;
    s->position += 8;
    size_t length = s->out_size - start;
    if (le32(t) != gc_crc32(0, (const uint8_t *)s->out + start, length)) return fail(s, "the CRC-32 does not match");
    if (le32(t + 4) != (uint32_t)length) return fail(s, "the length does not match the trailer's");
    return true;
}

gc_status gc_gunzip(const uint8_t *in, size_t size, size_t limit, const char *name, char **out, size_t *out_size) {
    inflater s = {.in = in, .size = size, .limit = limit};
    bool ok = member(&s);
    while (ok && s.position < s.size) ok = member(&s); /* concatenated members are one file */
    if (!ok) {
        gc_set_error(GC_ERR_FORMAT, "%s: %s (gzip byte %zu)", name, s.problem, s.position);
        free(s.out);
        *out = NULL;
        *out_size = 0;
        return GC_ERR_FORMAT;
    }
    if (!s.out) {
        s.out = malloc(1);
        if (!s.out) gc_fatal("gunzip: out of host memory");
    }
    s.out[s.out_size] = '\0';
    *out = s.out;
    *out_size = s.out_size;
    return GC_OK;
}
