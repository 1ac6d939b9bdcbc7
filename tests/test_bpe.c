/* Byte-level BPE tokenizers (GPT-2's pre-tokenizer; Qwen2's NFC and Split with single digits
 * and an appended <|endoftext|>; Llama-3's Split with up to three digits, ignore_merges and a
 * <|begin_of_text|>) against the reference's ids (tests/make_decoder_fixture.py) on a few
 * hundred strings of many scripts, whitespace runs, digits, contractions and special tokens;
 * truncation; and files refused by name. */
#include "check.h"
#include "base/json_file.h"
#include "nn/tokenize/tokenizer_internal.h"
#include "base/utf8.h"

static const char *const kinds[] = {"gpt2", "qwen2", "llama3"};

static gc_tokenizer *load(const char *kind) {
    char path[512];
    snprintf(path, sizeof path, "%s/bpe_%s.json", GC_TEST_FIXTURES, kind);
    gc_tokenizer *tokenizer;
    gc_status status = gc_tokenizer_load(path, &tokenizer);
    if (status != GC_OK) fprintf(stderr, "%s\n", gc_last_error());
    REQUIRE(status == GC_OK);
    return tokenizer;
}

static void test_reference_ids(void) {
    char path[512];
    gc_json *cases;
    snprintf(path, sizeof path, "%s/bpe_cases.json", GC_TEST_FIXTURES);
    REQUIRE(gc_json_file_read(path, 1 << 22, &cases) == GC_OK);
    const gc_json *strings = gc_json_member(cases, "strings"), *all_ids = gc_json_member(cases, "ids");
    REQUIRE(strings && all_ids && strings->count >= 300);
    int32_t got[4096];
    for (int k = 0; k < 3; k++) {
        gc_tokenizer *tokenizer = load(kinds[k]);
        const gc_json *want = gc_json_member(all_ids, kinds[k])->first;
        int failures = 0;
        for (const gc_json *text = strings->first; text; text = text->next, want = want->next) {
            int64_t count = gc_tokenizer_encode(tokenizer, text->string, 4096, got);
            bool same = count == want->count;
            const gc_json *id = want->first;
            for (int64_t i = 0; same && i < count; i++, id = id->next) same = got[i] == id->integer;
            if (!same && failures++ < 5) {
                fprintf(stderr, "%s: \"%s\": got", kinds[k], text->string);
                for (int64_t i = 0; i < count; i++) fprintf(stderr, " %d", got[i]);
                fprintf(stderr, ", want");
                for (id = want->first; id; id = id->next) fprintf(stderr, " %lld", (long long)id->integer);
                fprintf(stderr, "\n");
            }
            CHECK(same);
        }
        gc_tokenizer_free(tokenizer);
    }
    gc_json_free(cases);
}

/* The splits alone, against the reference's pieces of the NFC of each string: the split's
 * differences show here even where the small vocabulary's merges would hide them. */
static void test_pieces(void) {
    static const gc_bpe_split splits[3] = {GC_BPE_SPLIT_GPT2, GC_BPE_SPLIT_QWEN2, GC_BPE_SPLIT_LLAMA3};
    char path[512];
    gc_json *cases;
    snprintf(path, sizeof path, "%s/bpe_cases.json", GC_TEST_FIXTURES);
    REQUIRE(gc_json_file_read(path, 1 << 22, &cases) == GC_OK);
    const gc_json *strings = gc_json_member(cases, "strings"), *ends = gc_json_member(cases, "piece_ends");
    for (int k = 0; k < 3; k++) {
        const gc_json *want = gc_json_member(ends, kinds[k])->first;
        for (const gc_json *text = strings->first; text; text = text->next, want = want->next) {
            gc_codes codes = {0};
            for (size_t at = 0, length = strlen(text->string); at < length;) {
                uint32_t code;
                at += gc_utf8_decode((const unsigned char *)text->string + at, length - at, &code);
                gc_codes_push(&codes, code);
            }
            gc_nfc(&codes);
            REQUIRE(!codes.failed);
            const gc_json *end = want->first;
            bool same = true;
            for (size_t at = 0; at < codes.count && same; end = end->next) {
                at += gc_bpe_piece_length(splits[k], codes.items, codes.count, at);
                same = end && end->integer == (int64_t)at;
            }
            CHECK_MSG(same && !end, "%s: \"%s\": the pieces differ from the reference's", kinds[k], text->string);
            free(codes.items);
        }
    }
    gc_json_free(cases);
}

/* Truncation cuts the text's tokens and keeps the template's: Qwen2's <|endoftext|> stays
 * last, Llama-3's <|begin_of_text|> first. */
static void test_truncation(void) {
    int32_t full[256], cut[8];
    for (int k = 1; k < 3; k++) {
        gc_tokenizer *tokenizer = load(kinds[k]);
        int64_t n = gc_tokenizer_encode(tokenizer, "the cat sat on the mat, naïve café 1234567", 256, full);
        int64_t m = gc_tokenizer_encode(tokenizer, "the cat sat on the mat, naïve café 1234567", 5, cut);
        REQUIRE(n > 5 && m == 5);
        bool after = k == 1;
        for (int i = 0; i < 4; i++) CHECK(cut[i + (after ? 0 : 1)] == full[i + (after ? 0 : 1)]);
        CHECK(after ? cut[4] == full[n - 1] : cut[0] == full[0]);
        gc_tokenizer_free(tokenizer);
    }
}

/* A tokenizer of another kind of pre-tokenizer or normaliser is refused, naming it. */
static void test_refused(void) {
    static const char *const files[][2] = {
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": "
         "\"Whitespace\"}}", "pre_tokenizer type \"Whitespace\" is not supported"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"NFKC\"},"
         " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", "normalizer type \"NFKC\" is not supported"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}, \"pre_tokenizer\": {\"type\": "
         "\"ByteLevel\"}}", "the merge's token \"b\" is not in the vocabulary"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": "
         "\"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": "
         "\"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}}",
         "the Split pattern \"\\s+...\" is not one gradcache implements"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": "
         "\"ByteLevel\"}, \"added_tokens\": [{\"id\": 5, \"content\": \"<x>\"}]}", "leave a gap after the vocabulary's"},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        gc_tokenizer *tokenizer;
        gc_status status = gc_tokenizer_load_memory(files[i][0], strlen(files[i][0]), "t.json", &tokenizer);
        CHECK_MSG(status == GC_ERR_FORMAT && tokenizer == NULL && strstr(gc_last_error(), files[i][1]) &&
                      !strncmp(gc_last_error(), "t.json: ", 8),
                  "case %zu: %s", i, gc_last_error());
        gc_clear_error();
    }
}

int main(void) {
    GC_TEST_CASE(test_reference_ids);
    GC_TEST_CASE(test_pieces);
    GC_TEST_CASE(test_truncation);
    GC_TEST_CASE(test_refused);
    return gc_test_result();
}
