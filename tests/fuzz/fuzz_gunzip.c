/* libFuzzer target for the gzip reader (nn/io/gunzip.c), which `gradcache data manpages` runs
 * on the compressed manual pages it finds. Any input must be refused with GC_ERR_FORMAT and a
 * message naming it, or give at most `limit` bytes whose CRC-32 the trailer vouched for; the
 * output never grows past the limit, whatever the input claims. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/gunzip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { LIMIT = 1 << 20 };
    char *out;
    size_t out_size;
    gc_status status = gc_gunzip(data, size, LIMIT, "fuzz", &out, &out_size);
    if (status == GC_OK) {
        if (out_size > LIMIT || out[out_size] != '\0') abort();
        free(out);
    } else {
        if (status != GC_ERR_FORMAT || out != NULL || strncmp(gc_last_error(), "fuzz: ", 6) != 0) abort();
        gc_clear_error();
    }
    return 0;
}
