/* The gzip reader (nn/io/gunzip.c) against the gzip program: every compression level, data
 * that compress well and data that do not (stored blocks), empty data, concatenated members;
 * then hostile inputs: every truncation of a file, a wrong CRC, a wrong length, output past
 * the limit, a distance before the start. Each is refused with GC_ERR_FORMAT naming the file,
 * never read past its end (the sanitizer build runs this too). */
#include "check.h"
#include "nn/io/gunzip.h"

/* data[0, size) compressed by `gzip -LEVEL` into a new buffer. */
static uint8_t *gzip_program(const void *data, size_t size, int level, size_t *out_size) {
    char in_path[] = "/tmp/gc_gunzip_XXXXXX";
    int fd = mkstemp(in_path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, data, size) == (ssize_t)size);
    close(fd);
    char command[128];
    snprintf(command, sizeof command, "gzip -%d -c %s", level, in_path);
    FILE *pipe = popen(command, "r");
    REQUIRE(pipe);
    size_t capacity = size + 1024, n = 0;
    uint8_t *out = malloc(capacity);
    REQUIRE(out);
    for (size_t got; (got = fread(out + n, 1, capacity - n, pipe)) > 0;) {
        n += got;
        if (n == capacity) REQUIRE((out = realloc(out, capacity *= 2)));
    }
    REQUIRE(pclose(pipe) == 0);
    unlink(in_path);
    *out_size = n;
    return out;
}

static void check_round_trip(const char *what, const void *data, size_t size, int level) {
    size_t packed_size, got_size;
    uint8_t *packed = gzip_program(data, size, level, &packed_size);
    char *got;
    gc_status status = gc_gunzip(packed, packed_size, size + 1, what, &got, &got_size);
    CHECK_MSG(status == GC_OK, "%s, level %d: %s", what, level, gc_last_error());
    if (status == GC_OK) {
        CHECK_MSG(got_size == size && memcmp(got, data, size) == 0, "%s, level %d: other bytes", what, level);
        CHECK(got[got_size] == '\0');
        free(got);
    }
    free(packed);
}

static bool refused(const uint8_t *in, size_t size, size_t limit, const char *expect) {
    char *got = (char *)1;
    size_t got_size = 1;
    gc_status status = gc_gunzip(in, size, limit, "page.gz", &got, &got_size);
    bool ok = status == GC_ERR_FORMAT && got == NULL && got_size == 0 && strncmp(gc_last_error(), "page.gz: ", 9) == 0 &&
              (!expect || strstr(gc_last_error(), expect));
    if (status == GC_OK) free(got);
    if (!ok) printf("expected a refusal (%s), got %d: %s\n", expect ? expect : "any", status, gc_last_error());
    gc_clear_error();
    return ok;
}

int main(void) {
    if (system("gzip --version >/dev/null 2>&1") != 0) {
        printf("no gzip program: skipped\n");
        return GC_TEST_SKIP;
    }
    CHECK(gc_crc32(0, (const uint8_t *)"123456789", 9) == 0xcbf43926u); /* the check value of CRC-32 */

    size_t text_size = 200000, noise_size = 70000;
    char *text = malloc(text_size);
    uint8_t *noise = malloc(noise_size);
    REQUIRE(text && noise);
    const char *words[] = {"the ", "gradient ", "cache ", "of ", "a ", "contrastive ", "loss\n", "batch "};
    uint64_t state = 42;
    for (size_t i = 0; i < text_size;) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const char *word = words[state >> 61];
        for (size_t k = 0; word[k] && i < text_size; k++) text[i++] = word[k];
    }
    for (size_t i = 0; i < noise_size; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        noise[i] = (uint8_t)(state >> 56);
    }
    for (int level = 1; level <= 9; level += 4) { /* 1 and 5: fixed and dynamic blocks; 9: longest matches */
        check_round_trip("text", text, text_size, level);
        check_round_trip("noise", noise, noise_size, level); /* incompressible: stored blocks */
        check_round_trip("one byte", "x", 1, level);
        check_round_trip("empty", "", 0, level);
    }

    size_t a_size, b_size;
    uint8_t *a = gzip_program("first ", 6, 6, &a_size), *b = gzip_program("second", 6, 6, &b_size);
    uint8_t *both = malloc(a_size + b_size);
    REQUIRE(both);
    memcpy(both, a, a_size);
    memcpy(both + a_size, b, b_size);
    char *got;
    size_t got_size;
    CHECK(gc_gunzip(both, a_size + b_size, 100, "both", &got, &got_size) == GC_OK && got_size == 12 &&
          memcmp(got, "first second", 12) == 0); /* members concatenated are one file */
    free(got);

    size_t page_size;
    uint8_t *page = gzip_program(text, 5000, 6, &page_size);
    int truncations_refused = 0;
    for (size_t cut = 0; cut < page_size; cut++) truncations_refused += refused(page, cut, 5000, NULL);
    CHECK_MSG(truncations_refused == (int)page_size, "%d of %zu truncations refused", truncations_refused, page_size);
    CHECK(refused(page, page_size, 4999, "larger than the limit"));
    page[page_size - 8] ^= 1;
    CHECK(refused(page, page_size, 5000, "CRC-32"));
    page[page_size - 8] ^= 1;
    page[page_size - 4] ^= 1;
    CHECK(refused(page, page_size, 5000, "length"));
    page[page_size - 4] ^= 1;
    page[0] = 'x';
    CHECK(refused(page, page_size, 5000, "not gzip"));
    /* a fixed-code block whose first symbol copies from distance 1: nothing before it */
    const uint8_t far[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x03, 0x02, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(refused(far, sizeof far, 100, "before the start"));
    const uint8_t reserved[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x07, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(refused(reserved, sizeof reserved, 100, "type 3"));

    free(text);
    free(noise);
    free(a);
    free(b);
    free(both);
    free(page);
    return gc_test_result();
}
