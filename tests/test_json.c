/* The JSON reader's two grammars (base/json.h): a safetensors header's (strict) and a whole
 * document's (config.json, tokenizer.json): values, numbers exact or rounded, and every
 * malformed input refused with its position. */
#include "check.h"
#include "base/json.h"

static gc_json *document(const char *text, gc_json_error *error) {
    return gc_json_parse_document(text, strlen(text), 8, error);
}

static void test_values(void) {
    gc_json_error error;
    gc_json *d = document(" {\"t\": true, \"f\": false, \"n\": null, \"i\": -42, \"x\": 1e-12, \"y\": 0.5, "
                          "\"big\": 123456789012345678901234567890, \"s\": \"\\u00e9\\ud83d\\ude00\", \"a\": [1, [], {}]} ",
                          &error);
    REQUIRE(d);
    CHECK(gc_json_member(d, "t")->type == GC_JSON_BOOL && gc_json_member(d, "t")->boolean);
    CHECK(gc_json_member(d, "f")->type == GC_JSON_BOOL && !gc_json_member(d, "f")->boolean);
    CHECK(gc_json_member(d, "n")->type == GC_JSON_NULL);
    const gc_json *i = gc_json_member(d, "i");
    CHECK(i->type == GC_JSON_INTEGER && i->integer == -42 && i->number == -42);
    CHECK(gc_json_member(d, "x")->type == GC_JSON_NUMBER && gc_json_member(d, "x")->number == 1e-12);
    CHECK(gc_json_member(d, "y")->number == 0.5);
    const gc_json *big = gc_json_member(d, "big"); /* past int64: a double */
    CHECK(big->type == GC_JSON_NUMBER && big->number == 123456789012345678901234567890.0);
    CHECK(strcmp(gc_json_member(d, "s")->string, "\xc3\xa9\xf0\x9f\x98\x80") == 0);
    CHECK(gc_json_member(d, "a")->count == 3 && gc_json_member(d, "missing") == NULL);
    CHECK(gc_json_member(NULL, "t") == NULL && gc_json_member(i, "t") == NULL);
    gc_json_free(d);
}

static void expect_refused(const char *text, size_t position, const char *message) {
    gc_json_error error = {0};
    gc_json *d = document(text, &error);
    CHECK_MSG(!d && error.position == position && strstr(error.message, message), "%s: got \"%s\" at %zu", text,
              error.message, error.position);
    gc_json_free(d);
}

static void test_refused(void) {
    expect_refused("tru", 0, "expected a value");
    expect_refused("nul", 0, "expected a value");
    expect_refused("-", 1, "expected a digit");
    expect_refused("01", 0, "leading zero");
    expect_refused("-01", 0, "leading zero");
    expect_refused("1.", 2, "a digit after '.'");
    expect_refused("1e", 2, "a digit in the exponent");
    expect_refused("1e999", 0, "out of the range of a double");
    expect_refused("+1", 0, "expected a value");
    expect_refused("[1,]", 3, "expected a value");
    expect_refused("{\"a\": 1, \"a\": 2}", 9, "duplicate key \"a\"");
    expect_refused("[[[[[[[[[1]]]]]]]]]", 8, "nesting deeper than 8 levels");
    expect_refused("\"\\u0000\"", 1, "\\u0000 in a string");
    expect_refused("\"\xff\"", 1, "invalid UTF-8");
    expect_refused("true false", 5, "expected the end of the text");
}

/* The header grammar keeps refusing what safetensors headers never hold. */
static void test_strict(void) {
    static const char *const texts[] = {"true", "null", "-1", "0.5", "1e3"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        gc_json_error error = {0};
        gc_json *d = gc_json_parse(texts[i], strlen(texts[i]), 8, &error);
        CHECK_MSG(!d, "%s was accepted by the strict grammar", texts[i]);
        gc_json_free(d);
    }
    CHECK(strcmp(gc_json_type_name(GC_JSON_BOOL), "true or false") == 0);
}

int main(void) {
    test_values();
    test_refused();
    test_strict();
    return gc_test_result();
}
