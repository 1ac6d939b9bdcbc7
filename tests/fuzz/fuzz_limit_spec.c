/* libFuzzer target for the parsers of outside text in the tensor layer: sizes ("512M")
 * and GC_MEM_LIMIT specifications ("cpu=2G,cuda:0=40G"). Any input must give GC_OK or
 * GC_ERR_FORMAT with a message, never a crash, a hang or an out-of-bounds read; the
 * sanitizers built in with it catch the last. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/alloc.h"
#include "gradcache/memory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* the parsers take C strings, as getenv gives them */

    size_t bytes = 0;
    gc_status status = gc_parse_size(text, &bytes);
    if (status != GC_OK && (status != GC_ERR_FORMAT || gc_last_error()[0] == '\0')) abort();

    gc_limit_entry entries[GC_MAX_LIMIT_ENTRIES];
    int count = -1;
    status = gc_parse_limit_spec(text, entries, &count);
    if (status == GC_OK && (count < 1 || count > GC_MAX_LIMIT_ENTRIES)) abort();
    if (status != GC_OK && status != GC_ERR_FORMAT) abort();
    gc_clear_error();
    free(text);
    return 0;
}
