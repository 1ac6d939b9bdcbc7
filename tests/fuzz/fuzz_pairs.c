/* libFuzzer target for the pair-file parser (train/pairs.c). Any input must either be
 * refused with GC_ERR_FORMAT and a one-line message that names the input, or be accepted
 * as texts that are non-empty, free of tabs, newlines and carriage returns, and that give
 * back the same examples when written out again as a pair file and parsed a second time.
 * The sanitizers built in with it catch out-of-bounds reads and leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The examples written back as a pair file: fields joined by tabs, lines ended by \n. */
static char *write_back(const gc_pairs *pairs, size_t *size) {
    int columns = 2 + pairs->negatives;
    size_t total = 0;
    for (int64_t i = 0; i < pairs->count * columns; i++) total += strlen(pairs->texts[i]) + 1;
    char *text = malloc(total);
    if (!text) abort();
    char *out = text;
    for (int64_t i = 0; i < pairs->count * columns; i++) {
        size_t length = strlen(pairs->texts[i]);
        memcpy(out, pairs->texts[i], length);
        out += length;
        *out++ = (i + 1) % columns == 0 ? '\n' : '\t';
    }
    *size = total;
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_pairs pairs;
    gc_status status = gc_pairs_parse((const char *)data, size, "fuzz", &pairs);
    if (status != GC_OK) {
        const char *message = gc_last_error();
        if (status != GC_ERR_FORMAT || pairs.texts || strncmp(message, "fuzz:", 5) != 0 || strchr(message, '\n'))
            abort();
        gc_clear_error();
        return 0;
    }
    if (pairs.count < 1 || pairs.negatives < 0) abort();
    for (int64_t i = 0; i < pairs.count * (2 + pairs.negatives); i++)
        if (!pairs.texts[i][0] || strpbrk(pairs.texts[i], "\t\n\r")) abort();

    size_t again_size = 0;
    char *again = write_back(&pairs, &again_size);
    gc_pairs reparsed;
    if (gc_pairs_parse(again, again_size, "again", &reparsed) != GC_OK) abort();
    if (reparsed.count != pairs.count || reparsed.negatives != pairs.negatives) abort();
    for (int64_t i = 0; i < pairs.count * (2 + pairs.negatives); i++)
        if (strcmp(reparsed.texts[i], pairs.texts[i]) != 0) abort();
    gc_pairs_free(&reparsed);
    gc_pairs_free(&pairs);
    free(again);
    return 0;
}
