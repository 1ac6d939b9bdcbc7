/* libFuzzer target for the WordNet data-file reader (train/wordnet.c), which `gradcache data
 * wordnet` runs on files found on disk. Any input, read as a stream, must be refused with
 * GC_ERR_FORMAT and a message naming it, or give pair text that the pair reader accepts
 * whole (the reader writes only lines that are valid pairs) with as many lines as it
 * counts. Lines are bounded: the reader never holds more than GC_WORDNET_MAX_LINE bytes of
 * one, whatever the input. */
#define _GNU_SOURCE /* fmemopen */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A side's text is pair lines: empty, or accepted whole by the pair reader, line for line. */
static void check_side(const gc_wordnet_side *side) {
    if (side->pairs == 0) {
        if (side->size != 0) abort();
        return;
    }
    gc_pairs pairs;
    if (gc_pairs_parse(side->text, side->size, "side", &pairs) != GC_OK || pairs.count != side->pairs ||
        pairs.negatives != 0)
        abort();
    gc_pairs_free(&pairs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0; /* fmemopen refuses an empty buffer */
    FILE *in = fmemopen((void *)data, size, "r");
    if (!in) abort();
    gc_wordnet_split split = {0};
    gc_status status = gc_wordnet_read_stream(in, "fuzz", 0.3, 7, &split);
    fclose(in);
    if (status == GC_OK) {
        check_side(&split.train);
        check_side(&split.dev);
    } else {
        if (status != GC_ERR_FORMAT || strncmp(gc_last_error(), "fuzz:", 5) != 0) abort();
        gc_clear_error();
    }
    gc_wordnet_split_free(&split);
    return 0;
}
