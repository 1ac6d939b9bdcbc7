/* The store's wire format (see store_protocol.h). */
#include "store_protocol.h"

#include <string.h>

#include "gradcache/dist.h"

void gc_store_put_u64(uint8_t *out, uint64_t value) {
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(value >> (8 * i));
}

uint64_t gc_store_get_u64(const uint8_t *in) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value |= (uint64_t)in[i] << (8 * i);
    return value;
}

static uint32_t get_u32(const uint8_t *in) {
    return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
}

static void put_u32(uint8_t *out, uint32_t value) {
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(value >> (8 * i));
}

long gc_store_parse_request(const uint8_t *data, size_t size, gc_store_request *request, const char **problem) {
    *request = (gc_store_request){0};
    if (size < 1) return 0;
    uint8_t op = data[0];
    if (op < GC_STORE_SET || op > GC_STORE_CHECK) {
        *problem = "unknown operation";
        return -1;
    }
    request->op = (gc_store_op)op;
    if (size < 5) return 0;
    uint32_t key_size = get_u32(data + 1);
    if (key_size < 1 || key_size > GC_STORE_KEY_MAX) {
        *problem = "key length out of range";
        return -1;
    }
    size_t used = 5 + (size_t)key_size;
    if (size < used) return 0;
    request->key = (const char *)data + 5;
    request->key_size = key_size;
    if (memchr(request->key, '\0', key_size)) {
        *problem = "key holds a NUL byte";
        return -1;
    }
    if (op == GC_STORE_ADD) {
        if (size < used + 8) return 0;
        request->delta = (int64_t)gc_store_get_u64(data + used);
        return (long)(used + 8);
    }
    if (op != GC_STORE_SET) return (long)used;
    if (size < used + 8) return 0;
    uint64_t value_size = gc_store_get_u64(data + used);
    if (value_size > GC_STORE_VALUE_MAX) {
        *problem = "value length out of range";
        return -1;
    }
    used += 8;
    if (size - used < value_size) return 0;
    request->value = data + used;
    request->value_size = (size_t)value_size;
    return (long)(used + value_size);
}

size_t gc_store_encode_request(const gc_store_request *request, uint8_t bytes[GC_STORE_REQUEST_MAX]) {
    if (request->key_size < 1 || request->key_size > GC_STORE_KEY_MAX || request->value_size > GC_STORE_VALUE_MAX)
        gc_fatal("store: a request with a key of %zu bytes (1 to %d) and a value of %zu (at most %u)",
                 request->key_size, GC_STORE_KEY_MAX, request->value_size, GC_STORE_VALUE_MAX);
    size_t size = 5 + request->key_size;
    if (request->op == GC_STORE_ADD) size += 8;
    if (request->op == GC_STORE_SET) size += 8 + request->value_size;
    bytes[0] = (uint8_t)request->op;
    put_u32(bytes + 1, (uint32_t)request->key_size);
    memcpy(bytes + 5, request->key, request->key_size);
    uint8_t *rest = bytes + 5 + request->key_size;
    if (request->op == GC_STORE_ADD) gc_store_put_u64(rest, (uint64_t)request->delta);
    if (request->op == GC_STORE_SET) {
        gc_store_put_u64(rest, request->value_size);
        if (request->value_size) memcpy(rest + 8, request->value, request->value_size);
    }
    return size;
}
