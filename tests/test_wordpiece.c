/* The tokenizers: WordPiece ids equal the reference tokenizer's (Hugging Face tokenizers) on
 * the 333 strings of tests/fixtures/wordpiece_cases.json (tests/make_wordpiece_fixture.py),
 * with and without truncation; batches (padding, masks, dtypes); the byte tokenizer; and a
 * tokenizer.json this library does not implement refused with the file and the problem. */
#include "check.h"
#include "base/json_file.h"

#define FIXTURES GC_TEST_FIXTURES
#define TOKENIZER FIXTURES "/minilm_tokenizer.json"
#define MAX_IDS 4096

static gc_tokenizer *load_minilm(void) {
    gc_tokenizer *tokenizer;
    REQUIRE(gc_tokenizer_load(TOKENIZER, &tokenizer) == GC_OK);
    return tokenizer;
}

/* ids[0..count) equal the JSON array `want`; prints the first difference. */
static bool same_ids(const int32_t *ids, int64_t count, const gc_json *want, const char *text, const char *what) {
    int64_t i = 0;
    const gc_json *item = want->first;
    for (; item && i < count; item = item->next, i++)
        if (item->integer != ids[i]) break;
    if (!item && i == count) return true;
    fprintf(stderr, "%s of \"%s\": position %lld: got %d, want %lld (%lld ids, want %d)\n", what, text, (long long)i,
            i < count ? ids[i] : -1, item ? (long long)item->integer : -1LL, (long long)count, want->count);
    return false;
}

static void test_reference_ids(void) {
    gc_json *fixture;
    REQUIRE(gc_json_file_read(FIXTURES "/wordpiece_cases.json", 1 << 24, &fixture) == GC_OK);
    const gc_json *cases = gc_json_member(fixture, "cases"), *truncated_to = gc_json_member(fixture, "truncated_to");
    REQUIRE(cases && cases->count >= 200 && truncated_to);
    gc_tokenizer *tokenizer = load_minilm();
    int32_t ids[MAX_IDS];
    int matched = 0;
    for (const gc_json *c = cases->first; c; c = c->next) {
        const char *text = gc_json_member(c, "text")->string;
        const gc_json *full = gc_json_member(c, "ids"), *cut = gc_json_member(c, "ids_max8");
        REQUIRE(full && cut && full->count < MAX_IDS);
        int64_t count = gc_tokenizer_encode(tokenizer, text, MAX_IDS, ids);
        bool same = same_ids(ids, count, full, text, "ids");
        count = gc_tokenizer_encode(tokenizer, text, truncated_to->integer, ids);
        same = same_ids(ids, count, cut, text, "truncated ids") && same;
        matched += same;
    }
    CHECK_MSG(matched == cases->count, "%d of %d strings tokenize as the reference does", matched, cases->count);
    gc_tokenizer_free(tokenizer);
    gc_json_free(fixture);
}

static void test_vocabulary(void) {
    gc_tokenizer *tokenizer = load_minilm();
    char buffer[16];
    CHECK(gc_tokenizer_vocab_size(tokenizer) == 30522);
    CHECK(gc_tokenizer_pad_id(tokenizer) == 0);
    CHECK(strcmp(gc_tokenizer_token(tokenizer, 101, buffer), "[CLS]") == 0);
    CHECK(strcmp(gc_tokenizer_token(tokenizer, 102, buffer), "[SEP]") == 0);
    CHECK(gc_tokenizer_token(tokenizer, 30522, buffer) == NULL && gc_tokenizer_token(tokenizer, -1, buffer) == NULL);
    /* the shortest length that holds a text: [CLS] one token [SEP] */
    int32_t ids[3];
    CHECK(gc_tokenizer_encode(tokenizer, "hello world", 3, ids) == 3 && ids[0] == 101 && ids[2] == 102);
    gc_tokenizer_free(tokenizer);
}

static void encode_too_short(void *tokenizer) {
    int32_t ids[2];
    gc_tokenizer_encode(tokenizer, "hi", 2, ids);
}

static void test_batch(void) {
    gc_tokenizer *tokenizer = load_minilm();
    const char *texts[] = {"hello world", "", "a much longer text with several words"};
    gc_tensor *ids, *mask;
    REQUIRE(gc_tokenize(tokenizer, texts, 3, 6, GC_PAD_TO_LONGEST, GC_F32, gc_cpu(), &ids, &mask) == GC_OK);
    CHECK(ids->dtype == GC_I32 && ids->shape[0] == 3 && ids->shape[1] == 6); /* the third is cut to 6 */
    const int32_t *id = gc_data(ids);
    const float *m = gc_data(mask);
    /* row 0: [CLS] hello world [SEP] then padding; row 1: [CLS] [SEP]; row 2: cut, [SEP] last */
    CHECK(id[0] == 101 && id[3] == 102 && id[4] == 0 && id[5] == 0 && m[3] == 1 && m[4] == 0);
    CHECK(id[6] == 101 && id[7] == 102 && m[7] == 1 && m[8] == 0);
    CHECK(id[17] == 102 && m[17] == 1);
    RELEASE(ids, mask);
    REQUIRE(gc_tokenize(tokenizer, texts, 2, 16, GC_PAD_TO_LONGEST, GC_F64, gc_cpu(), &ids, &mask) == GC_OK);
    CHECK(ids->shape[1] == 4 && mask->dtype == GC_F64); /* the longest row, not 16 */
    RELEASE(ids, mask);
    REQUIRE(gc_tokenize(tokenizer, texts, 2, 16, GC_PAD_TO_MAX_LENGTH, GC_F32, gc_cpu(), &ids, &mask) == GC_OK);
    CHECK(ids->shape[1] == 16);
    RELEASE(ids, mask);
    gc_test_expect_fatal(encode_too_short, tokenizer, "max length 2 leaves no room for text after 2 special tokens");
    gc_tokenizer_free(tokenizer);
}

static void test_bytes(void) {
    const gc_tokenizer *bytes = gc_tokenizer_bytes();
    int32_t ids[8];
    CHECK(gc_tokenizer_vocab_size(bytes) == GC_TOKEN_VOCAB);
    CHECK(gc_tokenizer_encode(bytes, "hé", 8, ids) == 4); /* [CLS] h and the two bytes of é */
    CHECK(ids[0] == GC_TOKEN_CLS && ids[1] == GC_TOKEN_FIRST_BYTE + 'h' && ids[2] == GC_TOKEN_FIRST_BYTE + 0xC3);
    CHECK(gc_tokenizer_encode(bytes, "abcdef", 3, ids) == 3);
    char buffer[16];
    CHECK(strcmp(gc_tokenizer_token(bytes, GC_TOKEN_FIRST_BYTE + 'A', buffer), "<0x41>") == 0);
    gc_tokenizer_free(bytes); /* a no-op on the shared instance */
    CHECK(gc_tokenizer_encode(bytes, "a", 8, ids) == 2);
}

/* A tokenizer.json made of `model` and `rest` (more top-level members, or ""). */
static gc_status load_text(const char *model, const char *rest) {
    char text[2048];
    snprintf(text, sizeof text, "{\"model\": %s%s}", model, rest);
    gc_tokenizer *tokenizer = NULL;
    gc_status status = gc_tokenizer_load_memory(text, strlen(text), "bad/tokenizer.json", &tokenizer);
    CHECK((status == GC_OK) == (tokenizer != NULL));
    gc_tokenizer_free(tokenizer);
    return status;
}

#define VOCAB "\"vocab\": {\"[UNK]\": 0, \"[CLS]\": 1, \"[SEP]\": 2, \"a\": 3}"
#define WORDPIECE "{\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", " VOCAB "}"

static void expect_refused(const char *model, const char *rest, const char *message) {
    gc_status status = load_text(model, rest);
    CHECK_MSG(status == GC_ERR_FORMAT && strstr(gc_last_error(), "bad/tokenizer.json: ") &&
                  strstr(gc_last_error(), message),
              "want \"%s\", got \"%s\"", message, gc_last_error());
}

static void test_refused(void) {
    CHECK(load_text(WORDPIECE, "") == GC_OK);
    expect_refused("{\"type\": \"Unigram\", " VOCAB "}", "", "model type \"Unigram\" is neither WordPiece");
    expect_refused("{\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\"}", "", "model has no vocab");
    expect_refused("{\"type\": \"WordPiece\", \"unk_token\": \"<unk>\", " VOCAB "}", "",
                   "unk_token \"<unk>\" is not in the vocabulary");
    expect_refused("{\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0, \"b\": 2}}", "",
                   "token \"b\" has id out of range");
    expect_refused("{\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"[UNK]\": 0, \"b\": 0}}", "",
                   "share id 0");
    expect_refused(WORDPIECE, ", \"normalizer\": {\"type\": \"NFKC\"}", "normalizer type \"NFKC\" is not supported");
    expect_refused(WORDPIECE, ", \"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": 1}",
                   "normalizer.\"lowercase\" is an integer, expected true or false");
    expect_refused(WORDPIECE, ", \"pre_tokenizer\": {\"type\": \"Metaspace\"}",
                   "pre_tokenizer type \"Metaspace\" is not supported");
    expect_refused(WORDPIECE, ", \"post_processor\": {\"type\": \"RobertaProcessing\"}",
                   "post_processor type \"RobertaProcessing\" is not supported");
    expect_refused(WORDPIECE, ", \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": [\"[CLS]\", 9], "
                   "\"sep\": [\"[SEP]\", 2]}", "post_processor.cls is not [token, id]");
    expect_refused(WORDPIECE, ", \"added_tokens\": [{\"id\": 1, \"content\": \"[CLS]\", \"lstrip\": true}]",
                   "added_tokens: \"[CLS]\" is single_word, lstrip, rstrip or normalized");
    expect_refused("[]", "", "\"model\" is an array, expected an object");
    expect_refused(WORDPIECE, ", \"model\": 1", "duplicate key \"model\"");
    gc_tokenizer *tokenizer;
    CHECK(gc_tokenizer_load(FIXTURES "/no-such-tokenizer.json", &tokenizer) == GC_ERR_IO && !tokenizer &&
          strstr(gc_last_error(), "no-such-tokenizer.json: cannot open"));
    gc_clear_error();
}

int main(void) {
    test_reference_ids();
    test_vocabulary();
    test_batch();
    test_bytes();
    test_refused();
    return gc_test_result();
}
