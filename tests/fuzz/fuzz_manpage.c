/* libFuzzer target for the roff reader (train/manpage.c), which `gradcache data manpages` runs
 * on every manual page it finds. Any input must be refused with GC_ERR_FORMAT and a message
 * naming it, or give a query and a passage that are valid UTF-8 without control characters,
 * the passage of GC_MANPAGE_MIN_WORDS to max_words words, single spaces between them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int words(const char *text) {
    int n = 0;
    for (const char *s = text; *s; s++) {
        if ((unsigned char)*s < ' ' || *s == 0x7f || (*s == ' ' && (s == text || s[1] == ' ' || s[1] == '\0'))) abort();
        n += s == text || s[-1] == ' ';
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX_WORDS = 50 };
    gc_manpage page;
    gc_status status = gc_manpage_parse((const char *)data, size, MAX_WORDS, "fuzz", &page);
    if (status == GC_OK) {
        int n = words(page.passage);
        if (words(page.query) < 1 || n < GC_MANPAGE_MIN_WORDS || n > MAX_WORDS) abort();
        if (!gc_json_utf8_valid(page.query, strlen(page.query)) || !gc_json_utf8_valid(page.passage, strlen(page.passage)))
            abort();
        gc_manpage_free(&page);
    } else {
        if (status != GC_ERR_FORMAT || strncmp(gc_last_error(), "fuzz: ", 6) != 0) abort();
        gc_clear_error();
    }
    return 0;
}
