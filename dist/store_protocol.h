/* The store's wire format: what a client sends and how the server reads it. Kept apart from
 * the sockets so that the parser of outside bytes can be fuzzed on its own
 * (tests/fuzz/fuzz_store.c). Private to dist/.
 *
 * A connection starts with the handshake (auth.h); then a request is one byte naming the
 * operation, the key as a u32 length and that many bytes (1 to GC_STORE_KEY_MAX, no NUL),
 * then for SET a u64 length and the value (at most GC_STORE_VALUE_MAX), for ADD an i64
 * delta; GET and CHECK carry nothing more. Integers are little-endian. A length past its
 * bound is refused as soon as it is read, so no request makes the server hold more than
 * GC_STORE_REQUEST_MAX bytes of it. The reply to SET is one byte: 0 done, 1 refused (the key
 * is set already: keys are written once), 2 refused (the store is full); to GET, 0, a u64
 * length and the value; to ADD, 0 and the i64 sum, or 1 alone (the key was SET: not a
 * counter) or 2 alone (full); to CHECK, one byte 1 (set) or 0. Counters are stored as
 * decimal text, so a GET of a counter reads its value. */
#ifndef GC_DIST_STORE_PROTOCOL_H
#define GC_DIST_STORE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "gradcache/dist.h"

/* The longest request and the longest reply. */
#define GC_STORE_REQUEST_MAX (1 + 4 + GC_STORE_KEY_MAX + 8 + GC_STORE_VALUE_MAX)
#define GC_STORE_REPLY_MAX (1 + 8 + GC_STORE_VALUE_MAX)

enum { GC_STORE_DONE = 0, GC_STORE_REFUSED_SET = 1, GC_STORE_REFUSED_FULL = 2 }; /* a SET's or ADD's reply */

typedef enum gc_store_op { GC_STORE_SET = 1, GC_STORE_GET = 2, GC_STORE_ADD = 3, GC_STORE_CHECK = 4 } gc_store_op;

typedef struct gc_store_request {
    gc_store_op op;
    const char *key;        /* [key_size] bytes, not NUL-terminated (points into the buffer) */
    size_t key_size;
    const uint8_t *value;   /* SET: [value_size] bytes */
    size_t value_size;
    int64_t delta;          /* ADD */
} gc_store_request;

/* Reads one request from the start of data[0, size): returns the bytes it used (> 0), 0 when
 * the request is not complete yet, or -1 when the bytes are not a request (then `problem`
 * says why). */
long gc_store_parse_request(const uint8_t *data, size_t size, gc_store_request *request, const char **problem);

/* The bytes of a request, written into out; returns their number. A key or value past the
 * bounds is a programmer error. */
size_t gc_store_encode_request(const gc_store_request *request, uint8_t out[GC_STORE_REQUEST_MAX]);

/* Little-endian integers. */
void gc_store_put_u64(uint8_t *out, uint64_t value);
uint64_t gc_store_get_u64(const uint8_t *in);

#endif
