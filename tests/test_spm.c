/* SentencePiece-style BPE tokenizers (Llama-2's legacy Prepend and Replace normaliser;
 * Mistral's Metaspace with prepend_scheme "first"; Metaspace "always" with split and no byte
 * fallback, fusing unknown characters) against the reference's ids (tests/make_spm_fixture.py)
 * on the hostile multilingual strings of bpe_cases.json and more of their own; merges longer
 * than 1023 bytes; and malformed files refused with one line naming the file. */
#include <stdlib.h>

#include "check.h"
#include "base/json_file.h"
#include "nn/tokenize/tokenizer_internal.h"

static const char *const styles[] = {"llama2", "mistral", "metaspace"};

static gc_json *read_fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", GC_TEST_FIXTURES, name);
    gc_json *document;
    REQUIRE(gc_json_file_read(path, 1 << 22, &document) == GC_OK);
    return document;
}

/* Whether `count` ids are the reference's `want`; the first few differences are printed. */
static bool same_ids(const char *style, const char *text, const int32_t *got, int64_t count, const gc_json *want,
                     int *failures) {
    bool same = count == want->count;
    const gc_json *id = want->first;
    for (int64_t i = 0; same && i < count; i++, id = id->next) same = got[i] == id->integer;
    if (!same && (*failures)++ < 5) {
        fprintf(stderr, "%s: \"%s\": got", style, text);
        for (int64_t i = 0; i < count; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, ", want");
        for (id = want->first; id; id = id->next) fprintf(stderr, " %lld", (long long)id->integer);
        fprintf(stderr, "\n");
    }
    return same;
}

/* Every case string, the reference's ids exactly (no tolerance: ids are integers). */
static void test_reference_ids(void) {
    gc_json *bpe_cases = read_fixture("bpe_cases.json"), *spm_cases = read_fixture("spm_cases.json");
    const gc_json *lists[2] = {gc_json_member(bpe_cases, "strings"), gc_json_member(spm_cases, "extra_strings")};
    REQUIRE(lists[0] && lists[1] && lists[0]->count >= 300 && lists[1]->count >= 20);
    int32_t got[4096];
    for (int s = 0; s < 3; s++) {
        char name[64];
        snprintf(name, sizeof name, "%s/spm_%s.json", GC_TEST_FIXTURES, styles[s]);
        gc_tokenizer *tokenizer;
        gc_status status = gc_tokenizer_load(name, &tokenizer);
        CHECK_MSG(status == GC_OK, "%s", gc_last_error());
        if (status != GC_OK) continue;
        const gc_json *want = gc_json_member(gc_json_member(spm_cases, "ids"), styles[s]);
        REQUIRE(want && want->count == lists[0]->count + lists[1]->count);
        want = want->first;
        int failures = 0, compared = 0;
        for (int l = 0; l < 2; l++)
            for (const gc_json *text = lists[l]->first; text; text = text->next, want = want->next, compared++) {
                int64_t count = gc_tokenizer_encode(tokenizer, text->string, 4096, got);
                CHECK(same_ids(styles[s], text->string, got, count, want, &failures));
            }
        CHECK_MSG(failures == 0, "%s: %d of %d strings differ from the reference", styles[s], failures, compared);
        gc_tokenizer_free(tokenizer);
    }
    gc_json_free(bpe_cases);
    gc_json_free(spm_cases);
}

/* A tokenizer.json of a BPE model with the vocabulary <unk>, the 256 byte tokens spelled by
 * `byte_format` ("<0x%02X>"; NULL: none) and then `tokens` (a JSON object's members, their ids
 * from 257, or 1 without byte tokens), the model's members `model` and the file's members `parts`. */
static char *tokenizer_json(const char *byte_format, const char *tokens, const char *model, const char *parts) {
    size_t capacity = 16384 + strlen(tokens) + strlen(model) + strlen(parts);
    char *json = malloc(capacity);
    REQUIRE(json);
    int used = snprintf(json, capacity, "{\"model\": {\"type\": \"BPE\", %s, \"vocab\": {\"<unk>\": 0", model);
    for (int byte = 0; byte_format && byte < 256; byte++) {
        used += snprintf(json + used, capacity - (size_t)used, ", \"");
        used += snprintf(json + used, capacity - (size_t)used, byte_format, byte);
        used += snprintf(json + used, capacity - (size_t)used, "\": %d", 1 + byte);
    }
    snprintf(json + used, capacity - (size_t)used, "%s%s}}%s%s}", *tokens ? ", " : "", tokens, *parts ? ", " : "",
             parts);
    return json;
}

static gc_tokenizer *load_json(char *json) {
    gc_tokenizer *tokenizer;
    gc_status status = gc_tokenizer_load_memory(json, strlen(json), "t.json", &tokenizer);
    CHECK_MSG(status == GC_OK, "%s", gc_last_error());
    free(json);
    return status == GC_OK ? tokenizer : NULL;
}

/* Merges of 2048 bytes (1024 + 1024, as ["a", "b"] pairs and "a b" strings) load and merge:
 * the reference's format bounds a merge by the file only. */
static void test_long_merges(void) {
    char *tokens = malloc(8192), *merges = malloc(8192), *text = malloc(4100);
    REQUIRE(tokens && merges && text);
    int used_tokens = 0, used_merges = snprintf(merges, 8192, "\"merges\": [");
    for (int length = 1, id = 257; length <= 2048; length *= 2, id++) {
        memset(text, 'a', (size_t)length);
        used_tokens += snprintf(tokens + used_tokens, 8192 - (size_t)used_tokens, "%s\"%.*s\": %d",
                                length > 1 ? ", " : "", length, text, id);
        if (length > 1)
            used_merges += snprintf(merges + used_merges, 8192 - (size_t)used_merges,
                                    length % 4 ? "%s\"%.*s %.*s\"" : "%s[\"%.*s\", \"%.*s\"]", length > 2 ? ", " : "",
                                    length / 2, text, length / 2, text);
    }
    snprintf(merges + used_merges, 8192 - (size_t)used_merges, "], \"unk_token\": \"<unk>\", \"byte_fallback\": true");
    gc_tokenizer *tokenizer = load_json(tokenizer_json("<0x%02X>", tokens, merges, ""));
    free(tokens);
    free(merges);
    if (tokenizer) {
        int32_t ids[8];
        memset(text, 'a', 4099);
        text[2049] = '\0';
        CHECK(gc_tokenizer_encode(tokenizer, text, 8, ids) == 2 && ids[0] == 257 + 11 && ids[1] == 257);
        text[2049] = 'a', text[3073] = '\0'; /* 2048 + 1024 + 1: the leftmost pairs merge first */
        int64_t count = gc_tokenizer_encode(tokenizer, text, 8, ids);
        CHECK(count == 3 && ids[0] == 257 + 11 && ids[1] == 257 + 10 && ids[2] == 257);
        gc_tokenizer_free(tokenizer);
    }
    free(text);
}

/* Unknown characters without byte fallback: one <unk> each, or one for a run with fuse_unk. */
static void test_unknown_characters(void) {
    for (int fuse = 0; fuse < 2; fuse++) {
        gc_tokenizer *tokenizer = load_json(tokenizer_json(
            NULL, "\"a\": 1", fuse ? "\"merges\": [], \"unk_token\": \"<unk>\", \"fuse_unk\": true"
                                     : "\"merges\": [], \"unk_token\": \"<unk>\", \"fuse_unk\": false", ""));
        if (!tokenizer) continue;
        int32_t ids[16];
        int64_t count = gc_tokenizer_encode(tokenizer, "a\xe6\x97\xa5\xe6\x9c\xac" "a\xf0\x9f\x98\x80", 16, ids);
        if (fuse) CHECK(count == 4 && ids[0] == 1 && ids[1] == 0 && ids[2] == 1 && ids[3] == 0);
        else CHECK(count == 5 && ids[1] == 0 && ids[2] == 0 && ids[3] == 1 && ids[4] == 0);
        gc_tokenizer_free(tokenizer);
    }
}

/* What a file says wrongly is refused with GC_ERR_FORMAT and one line naming the file and
 * the part: each case is one change to a tokenizer that loads. */
static void test_refused(void) {
    static const char *const fallback = "\"merges\": [], \"unk_token\": \"<unk>\", \"byte_fallback\": true";
    static const struct {
        const char *byte_format, *model, *parts, *message;
    } cases[] = {
        {"<0x%02X>", NULL, "", NULL}, /* the tokenizer every other case changes: it loads */
        {NULL, NULL, "", "model.byte_fallback: the byte token \"<0x00>\" is not in the vocabulary"},
        {"<0x%02x>", NULL, "", "model.byte_fallback: the byte token \"<0x0A>\" is not in the vocabulary"},
        {"<%02X>", NULL, "", "the byte token \"<0x00>\" is not in the vocabulary"},
        {"<0x%02X>", "\"merges\": [], \"byte_fallback\": \"yes\"", "", "model.\"byte_fallback\" is a string, expected"},
        {"<0x%02X>", "\"merges\": [\"a \\u2581\"], \"byte_fallback\": true", "", "merged token \"a\xe2\x96\x81\" is not"},
        {"<0x%02X>", NULL, "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" \"}, \"content\": \"x\"}",
         "a Replace must replace a non-empty \"String\" pattern"},
        {"<0x%02X>", NULL, "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"\"}, \"content\": \"x\"}",
         "a Replace must replace a non-empty \"String\" pattern"},
        {"<0x%02X>", NULL, "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\"}]}",
         "a Prepend has no \"prepend\""},
        {"<0x%02X>", NULL, "\"normalizer\": {\"type\": \"Sequence\"}", "a Sequence has no normalizers"},
        {"<0x%02X>", NULL, "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, 7]}",
         "normalizer type \"(none)\" is not supported for BPE"},
        {"<0x%02X>", NULL, "\"normalizer\": {\"type\": \"Lowercase\"}", "normalizer type \"Lowercase\" is not supported"},
        {"<0x%02X>", NULL, "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"__\"}",
         "Metaspace's replacement \"__\" is not one character"},
        {"<0x%02X>", NULL, "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\"}",
         "Metaspace's replacement \"\" is not one character"},
        {"<0x%02X>", NULL, "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"prepend_scheme\": \"sometimes\"}",
         "prepend_scheme \"sometimes\" is none of always, first, never"},
        {"<0x%02X>", NULL, "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"split\": 1}",
         "pre_tokenizer.\"split\" is an integer, expected"},
        {"<0x%02X>", NULL, "\"pre_tokenizer\": {\"type\": \"Whitespace\"}", "pre_tokenizer type \"Whitespace\" is not"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *tokens = cases[i].byte_format ? "\"a\": 257, \"\\u2581\": 258" : "\"a\": 1, \"\\u2581\": 2";
        char *json = tokenizer_json(cases[i].byte_format, tokens,
                                    cases[i].model ? cases[i].model : fallback, cases[i].parts);
        gc_tokenizer *tokenizer;
        gc_status status = gc_tokenizer_load_memory(json, strlen(json), "t.json", &tokenizer);
        if (!cases[i].message) CHECK_MSG(status == GC_OK, "case %zu: %s", i, gc_last_error());
        else
            CHECK_MSG(status == GC_ERR_FORMAT && tokenizer == NULL && strstr(gc_last_error(), cases[i].message) &&
                          !strncmp(gc_last_error(), "t.json: ", 8) && !strchr(gc_last_error(), '\n'),
                      "case %zu: %s", i, status == GC_OK ? "loaded" : gc_last_error());
        gc_tokenizer_free(tokenizer);
        gc_clear_error();
        free(json);
    }
}

int main(void) {
    GC_TEST_CASE(test_reference_ids);
    GC_TEST_CASE(test_long_merges);
    GC_TEST_CASE(test_unknown_characters);
    GC_TEST_CASE(test_refused);
    return gc_test_result();
}
