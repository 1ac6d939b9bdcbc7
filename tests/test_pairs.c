/* The pair-file parser (train/pairs.c): what it accepts, field by field, and one case per
 * kind of malformed input, each checked for its status, its file name and its line number. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gradcache/train.h"

static gc_status parse(const char *text, size_t size, gc_pairs *pairs) {
    return gc_pairs_parse(text, size, "in.tsv", pairs);
}

/* The same bytes read as a stream, as gc_pairs_read reads a file. */
static gc_status read_stream(const char *text, size_t size, gc_pairs *pairs) {
    FILE *in = size ? fmemopen((void *)text, size, "rb") : fopen("/dev/null", "rb");
    REQUIRE(in);
    gc_status status = gc_pairs_read_stream(in, "in.tsv", pairs);
    fclose(in);
    return status;
}

/* `text` (a C string literal, or explicit bytes with their size) must be refused with
 * GC_ERR_FORMAT and a message that starts with `location` ("in.tsv:3:") and contains
 * `problem`, from memory and from a stream alike. */
static void expect_refused_bytes(const char *text, size_t size, const char *location, const char *problem) {
    for (int from_stream = 0; from_stream < 2; from_stream++) {
        gc_pairs pairs;
        gc_status status = from_stream ? read_stream(text, size, &pairs) : parse(text, size, &pairs);
        const char *message = gc_last_error();
        CHECK_MSG(status == GC_ERR_FORMAT, "%s: status %s", problem, gc_status_name(status));
        CHECK_MSG(strncmp(message, location, strlen(location)) == 0 && strstr(message, problem),
                  "%s: want '%s ... %s', got '%s'", from_stream ? "stream" : "memory", location, problem, message);
        CHECK(pairs.count == 0 && pairs.texts == NULL);
        CHECK(strchr(message, '\n') == NULL); /* one line */
        gc_clear_error();
    }
}

/* What a stream gives is what the same bytes in memory give. */
static void expect_same_from_stream(const char *text, size_t size) {
    gc_pairs memory, stream;
    REQUIRE(parse(text, size, &memory) == GC_OK);
    CHECK(read_stream(text, size, &stream) == GC_OK);
    CHECK(stream.count == memory.count && stream.negatives == memory.negatives);
    for (int64_t i = 0; i < memory.count * (2 + memory.negatives) && stream.count == memory.count; i++)
        CHECK(strcmp(stream.texts[i], memory.texts[i]) == 0);
    gc_pairs_free(&memory);
    gc_pairs_free(&stream);
}

static void expect_refused(const char *text, const char *location, const char *problem) {
    expect_refused_bytes(text, strlen(text), location, problem);
}

static void test_accepts_pairs(void) {
    const char text[] = "a dog\tchien\nthe cat\tchat\n";
    gc_pairs pairs;
    REQUIRE(parse(text, strlen(text), &pairs) == GC_OK);
    CHECK(pairs.count == 2 && pairs.negatives == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 0, 0), "a dog") == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 0, 1), "chien") == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 1, 0), "the cat") == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 1, 1), "chat") == 0);
    gc_pairs_free(&pairs);
    CHECK(pairs.texts == NULL && pairs.count == 0);
}

static void test_accepts_negatives_crlf_and_no_final_newline(void) {
    /* \r\n endings, two negatives, UTF-8 of 2, 3 and 4 bytes, and no newline at the end. */
    const char text[] = "q1\tp\xC3\xA9\tn1\tn2\r\nq2\t\xE2\x82\xAC\tm1\t\xF0\x9F\x98\x80";
    gc_pairs pairs;
    REQUIRE(parse(text, strlen(text), &pairs) == GC_OK);
    CHECK(pairs.count == 2 && pairs.negatives == 2);
    CHECK(strcmp(gc_pairs_text(&pairs, 0, 1), "p\xC3\xA9") == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 0, 3), "n2") == 0); /* the \r is not part of the field */
    CHECK(strcmp(gc_pairs_text(&pairs, 1, 1), "\xE2\x82\xAC") == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 1, 3), "\xF0\x9F\x98\x80") == 0);
    gc_pairs_free(&pairs);
    expect_same_from_stream(text, strlen(text));
}

static void test_line_limit(void) {
    /* A line of exactly GC_PAIRS_MAX_LINE bytes is accepted, one byte more is not. */
    char *text = malloc(GC_PAIRS_MAX_LINE + 3);
    REQUIRE(text);
    memset(text, 'x', GC_PAIRS_MAX_LINE + 1);
    text[1] = '\t';
    text[GC_PAIRS_MAX_LINE] = '\n';
    gc_pairs pairs;
    CHECK(parse(text, GC_PAIRS_MAX_LINE + 1, &pairs) == GC_OK);
    CHECK(pairs.count == 1 && strlen(gc_pairs_text(&pairs, 0, 1)) == GC_PAIRS_MAX_LINE - 2);
    gc_pairs_free(&pairs);
    expect_same_from_stream(text, GC_PAIRS_MAX_LINE + 1);
    text[GC_PAIRS_MAX_LINE] = '\r'; /* the same line ended by \r\n: the \r is no part of it */
    text[GC_PAIRS_MAX_LINE + 1] = '\n';
    CHECK(parse(text, GC_PAIRS_MAX_LINE + 2, &pairs) == GC_OK);
    CHECK(pairs.count == 1 && strlen(gc_pairs_text(&pairs, 0, 1)) == GC_PAIRS_MAX_LINE - 2);
    gc_pairs_free(&pairs);
    expect_same_from_stream(text, GC_PAIRS_MAX_LINE + 2);
    text[GC_PAIRS_MAX_LINE] = 'x';
    text[GC_PAIRS_MAX_LINE + 1] = '\n';
    expect_refused_bytes(text, GC_PAIRS_MAX_LINE + 2, "in.tsv:1:", "longer than the limit of 4096");
    free(text);
}

static void test_refuses_layout(void) {
    expect_refused("", "in.tsv:", "no examples");
    expect_refused("\n", "in.tsv:1:", "empty line");
    expect_refused("a\tb\n\nc\td\n", "in.tsv:2:", "empty line");
    expect_refused("a\tb\n\n", "in.tsv:2:", "empty line"); /* one final newline is fine, two are not */
    expect_refused("a\tb\n\r\n", "in.tsv:2:", "empty line");
    expect_refused("a\tb\nc\td\nlonely\n", "in.tsv:3:", "one field");
    expect_refused("\tb\n", "in.tsv:1:", "starts with a tab");
    expect_refused("a\tb\t\n", "in.tsv:1:", "ends with a tab");
    expect_refused("a\tb\nc\t\td\n", "in.tsv:2:", "two tabs in a row");
    expect_refused("a\tb\tn\nc\td\n", "in.tsv:2:", "2 fields where line 1 has 3");
    expect_refused("a\tb\nc\td\tn\n", "in.tsv:2:", "3 fields where line 1 has 2");
    expect_refused("a\tb\rc\n", "in.tsv:1:", "carriage return");
    expect_refused("a\tb\r", "in.tsv:1:", "carriage return"); /* a \r at the end of the file ends no line */
    static const char nul[] = "a\tb\nc\t\0d\n";
    expect_refused_bytes(nul, sizeof nul - 1, "in.tsv:2:", "NUL byte at column 3");
}

static void test_refuses_invalid_utf8(void) {
    static const struct {
        const char *text, *problem;
    } cases[] = {
        {"a\tb\x80\n", "byte 0x80 at column 4"},          /* a continuation byte alone */
        {"a\tb\xC0\xAF\n", "byte 0xC0"},                   /* overlong '/' */
        {"a\tb\xC1\xBF\n", "byte 0xC1"},                   /* overlong 2-byte form */
        {"a\tb\xE0\x80\xAF\n", "byte 0xE0"},               /* overlong 3-byte form */
        {"a\tb\xF0\x80\x80\xAF\n", "byte 0xF0"},           /* overlong 4-byte form */
        {"a\tb\xED\xA0\x80\n", "byte 0xED"},               /* U+D800, a surrogate */
        {"a\tb\xED\xBF\xBF\n", "byte 0xED"},               /* U+DFFF, a surrogate */
        {"a\tb\xF4\x90\x80\x80\n", "byte 0xF4"},           /* U+110000 */
        {"a\tb\xF5\x80\x80\x80\n", "byte 0xF5"},           /* lead byte of nothing */
        {"a\tb\xFF\n", "byte 0xFF"},
        {"a\tb\xE2\x82\n", "byte 0xE2"},                   /* cut short by the newline */
        {"a\tb\xE2\x82", "byte 0xE2"},                     /* cut short by the end of the file */
        {"a\tb\xE2\x82\tc\n", "byte 0xE2"},                /* cut short by a tab */
        {"a\tb\xC3\xC3\xA9\n", "byte 0xC3 at column 4"},   /* a lead byte where a continuation belongs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        expect_refused(cases[i].text, "in.tsv:1:", "invalid UTF-8");
        expect_refused(cases[i].text, "in.tsv:1:", cases[i].problem);
    }
    /* The largest valid code points of each length, and U+E000 just after the surrogates. */
    const char valid[] = "\x7F\xDF\xBF\t\xEF\xBF\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF\n";
    gc_pairs pairs;
    CHECK(parse(valid, strlen(valid), &pairs) == GC_OK);
    gc_pairs_free(&pairs);
}

static void test_read_files(void) {
    char folder[] = "/tmp/gc_test_pairs_XXXXXX";
    REQUIRE(mkdtemp(folder));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/pairs.tsv", folder);

    gc_pairs pairs;
    CHECK(gc_pairs_read(path, &pairs) == GC_ERR_IO); /* missing */
    CHECK(strstr(gc_last_error(), path) && strstr(gc_last_error(), "cannot open"));
    CHECK(gc_pairs_read(folder, &pairs) == GC_ERR_IO); /* a folder: opens, cannot be read */
    CHECK(strstr(gc_last_error(), folder) && strstr(gc_last_error(), "cannot read"));

    /* Larger than the first read chunk, so that the buffer has to grow. */
    FILE *out = fopen(path, "wb");
    REQUIRE(out);
    const int lines = 20000;
    for (int i = 0; i < lines; i++) fprintf(out, "query %d\tpositive %d\n", i, i);
    fprintf(out, "bad\n");
    REQUIRE(fclose(out) == 0);
    CHECK(gc_pairs_read(path, &pairs) == GC_ERR_FORMAT);
    char location[PATH_MAX + 32];
    snprintf(location, sizeof location, "%s:%d: ", path, lines + 1);
    CHECK_MSG(strncmp(gc_last_error(), location, strlen(location)) == 0, "got '%s'", gc_last_error());

    REQUIRE(truncate(path, 0) == 0);
    out = fopen(path, "ab");
    REQUIRE(out);
    for (int i = 0; i < lines; i++) fprintf(out, "query %d\tpositive %d\n", i, i);
    REQUIRE(fclose(out) == 0);
    CHECK(gc_pairs_read(path, &pairs) == GC_OK);
    CHECK(pairs.count == lines && strcmp(gc_pairs_text(&pairs, lines - 1, 1), "positive 19999") == 0);
    gc_pairs_free(&pairs);
    gc_clear_error();
    unlink(path);
    rmdir(folder);
}

/* The reading stops at the first bad line, whatever follows: a pipe whose writer stays open
 * (as /dev/zero never ends) is refused at once, not read to an end that never comes. The
 * alarm ends the test if the reader waits for more. */
static void test_stops_at_first_bad_line(void) {
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    static const char start[] = "q\tp\nbad\tline\0\n";
    REQUIRE(write(pipe_fds[1], start, sizeof start - 1) == (ssize_t)(sizeof start - 1));
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", pipe_fds[0]);
    alarm(20);
    gc_pairs pairs;
    gc_status status = gc_pairs_read(path, &pairs);
    alarm(0);
    CHECK(status == GC_ERR_FORMAT && strstr(gc_last_error(), ":2: NUL byte at column 9"));
    gc_clear_error();
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

int main(void) {
    test_accepts_pairs();
    test_accepts_negatives_crlf_and_no_final_newline();
    test_line_limit();
    test_refuses_layout();
    test_refuses_invalid_utf8();
    test_read_files();
    test_stops_at_first_bad_line();
    return gc_test_result();
}
