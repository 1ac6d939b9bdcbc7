/* Parsing of sizes ("512M") and of GC_MEM_LIMIT specifications ("cpu=2G,cuda:0=40G").
 * This text comes from outside the program, so every malformed form is an error that
 * names the text, never a crash, and there is a fuzz target for it. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "gradcache/memory.h"

/* Parses [start, end) as a size. */
static gc_status parse_size_span(const char *start, const char *end, size_t *bytes) {
    int length = (int)(end - start);
    const char *p = start;
    uint64_t value = 0;
    if (p == end || !isdigit((unsigned char)*p)) goto malformed;
    for (; p < end && isdigit((unsigned char)*p); p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (value > (UINT64_MAX - digit) / 10) goto too_large;
        value = value * 10 + digit;
    }
    int shift = 0;
    if (p < end) {
        switch (toupper((unsigned char)*p)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: goto malformed;
        }
        p++;
        if (p < end && toupper((unsigned char)*p) == 'B') p++; /* "512MB" reads as "512M" */
    }
    if (p != end) goto malformed;
    if (value > (SIZE_MAX >> shift)) goto too_large;
    *bytes = (size_t)(value << shift);
    return GC_OK;
malformed:
    gc_set_error(GC_ERR_FORMAT, "malformed size '%.*s' (expected digits with an optional K, M, G or T)",
                 length, start);
    return GC_ERR_FORMAT;
too_large:
    gc_set_error(GC_ERR_FORMAT, "size '%.*s' is too large", length, start);
    return GC_ERR_FORMAT;
}

gc_status gc_parse_size(const char *text, size_t *bytes) {
    return parse_size_span(text, text + strlen(text), bytes);
}

/* Parses "cpu" or "cuda:N" in [start, end). */
static gc_status parse_device_span(const char *start, const char *end, gc_device *device) {
    size_t length = (size_t)(end - start);
    if (length == 3 && memcmp(start, "cpu", 3) == 0) {
        *device = gc_cpu();
        return GC_OK;
    }
    if (length > 5 && memcmp(start, "cuda:", 5) == 0 && length <= 7) {
        int index = 0;
        for (const char *p = start + 5; p < end; p++) {
            if (!isdigit((unsigned char)*p)) goto malformed;
            index = index * 10 + (*p - '0');
        }
        if (index >= GC_MAX_CUDA_DEVICES) goto malformed;
        *device = gc_cuda(index);
        return GC_OK;
    }
malformed:
    gc_set_error(GC_ERR_FORMAT, "unknown device '%.*s' (expected cpu or cuda:N, N < %d)", (int)length,
                 start, GC_MAX_CUDA_DEVICES);
    return GC_ERR_FORMAT;
}

gc_status gc_parse_limit_spec(const char *spec, gc_limit_entry *entries, int *count) {
    *count = 0;
    if (!strchr(spec, '=')) { /* one size for every device */
        size_t bytes;
        if (gc_parse_size(spec, &bytes) != GC_OK) return GC_ERR_FORMAT;
        entries[(*count)++] = (gc_limit_entry){gc_cpu(), bytes};
        for (int i = 0; i < GC_MAX_CUDA_DEVICES; i++) entries[(*count)++] = (gc_limit_entry){gc_cuda(i), bytes};
        return GC_OK;
    }
    const char *part = spec;
    for (;;) {
        const char *part_end = strchr(part, ',');
        if (!part_end) part_end = part + strlen(part);
        const char *equals = memchr(part, '=', (size_t)(part_end - part));
        if (!equals) {
            gc_set_error(GC_ERR_FORMAT, "memory limit '%.*s' is not device=size", (int)(part_end - part), part);
            return GC_ERR_FORMAT;
        }
        if (*count == GC_MAX_LIMIT_ENTRIES) {
            gc_set_error(GC_ERR_FORMAT, "memory limit specification has more than %d parts", GC_MAX_LIMIT_ENTRIES);
            return GC_ERR_FORMAT;
        }
        gc_limit_entry *entry = &entries[*count];
        if (parse_device_span(part, equals, &entry->device) != GC_OK ||
            parse_size_span(equals + 1, part_end, &entry->limit_bytes) != GC_OK)
            return GC_ERR_FORMAT;
        (*count)++;
        if (*part_end == '\0') return GC_OK;
        part = part_end + 1;
    }
}

gc_status gc_memory_apply_limit_spec(const char *spec) {
    gc_limit_entry entries[GC_MAX_LIMIT_ENTRIES];
    int count = 0;
    if (gc_parse_limit_spec(spec, entries, &count) != GC_OK) return GC_ERR_FORMAT;
    for (int i = 0; i < count; i++) gc_memory_set_limit(entries[i].device, entries[i].limit_bytes);
    return GC_OK;
}
