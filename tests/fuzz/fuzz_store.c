/* libFuzzer target for the store's wire format (dist/store_protocol.c), the bytes a store
 * server reads from a client once it has passed the handshake (that part: fuzz_auth.c). A
 * stream of requests is parsed the way the server does: each accepted request must re-encode
 * to exactly the bytes it was read from (so nothing was misread), with a key of 1 to
 * GC_STORE_KEY_MAX bytes without NUL and a value within GC_STORE_VALUE_MAX, and be at most
 * GC_STORE_REQUEST_MAX bytes; a refusal must say why; nothing may read out of bounds. The
 * server keeps a client's input in a buffer of GC_STORE_REQUEST_MAX bytes, so a parse that
 * still wants more once it has that many would wait forever: a length past its bound must be
 * refused as soon as it is read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/store_protocol.h"
#include "gradcache/dist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t at = 0;
    while (at < size) {
        gc_store_request request;
        const char *problem = NULL;
        long used = gc_store_parse_request(data + at, size - at, &request, &problem);
        if (used == 0 && size - at >= GC_STORE_REQUEST_MAX) abort(); /* it would never be complete */
        if (used == 0) break;     /* incomplete: the server would wait for more */
        if (used < 0) {
            if (!problem || !*problem) abort();
            break;                /* the server drops such a client */
        }
        if (request.key_size < 1 || request.key_size > GC_STORE_KEY_MAX || memchr(request.key, 0, request.key_size))
            abort();
        if (request.value_size > GC_STORE_VALUE_MAX || (size_t)used > GC_STORE_REQUEST_MAX) abort();
        uint8_t encoded[GC_STORE_REQUEST_MAX];
        size_t encoded_size = gc_store_encode_request(&request, encoded);
        if (encoded_size != (size_t)used || memcmp(encoded, data + at, encoded_size) != 0) abort();
        at += (size_t)used;
    }
    return 0;
}
