/* The real model: sentence-transformers/all-MiniLM-L6-v2 as `gradcache model fetch minilm`
 * puts it in models/minilm (or where GC_MINILM_DIR points). Its tokenizer gives the reference
 * ids for the fixture strings, its embeddings equal the PyTorch reference's within 1e-5 +
 * 1e-4 relative, and its contrastive-loss gradients within bert_check.h's tolerance
 * (tests/make_bert_fixture.py wrote the reference from the same weights), and copies whose
 * config.json the weights do not fit are refused before anything is built. Without the model
 * the test is skipped (exit 77), saying so: the loading code itself is tested on a small
 * model in test_bert. */
#include <sys/stat.h>

#include "bert_check.h"
#include "bert_folders.h"
#include "base/json_file.h"

#define TEXTS 48

static const char *model_folder(void) {
    const char *dir = getenv("GC_MINILM_DIR");
    return dir && *dir ? dir : GC_TEST_MODELS "/minilm";
}

/* The texts of the first TEXTS cases of wordpiece_cases.json, then the definitions and the
 * words of its 8 pairs (new strings; free each). */
static char **fixture_texts(void) {
    gc_json *cases_file;
    REQUIRE(gc_json_file_read(GC_TEST_FIXTURES "/wordpiece_cases.json", 1 << 24, &cases_file) == GC_OK);
    char **texts = calloc(TEXTS + 16, sizeof *texts);
    const gc_json *c = gc_json_member(cases_file, "cases")->first, *pairs = gc_json_member(cases_file, "pairs");
    REQUIRE(texts && pairs && pairs->count == 8);
    for (int i = 0; i < TEXTS; i++, c = c->next) texts[i] = strdup(gc_json_member(c, "text")->string);
    int i = 0;
    for (const gc_json *pair = pairs->first; pair; pair = pair->next, i++) {
        texts[TEXTS + i] = strdup(pair->first->string);
        texts[TEXTS + 8 + i] = strdup(pair->first->next->string);
    }
    gc_json_free(cases_file);
    return texts;
}

/* Our tokenizer's batch equals the fixture's (the reference's ids, padded to the longest). */
static void check_ids(const gc_tokenizer *tokenizer, const char *const *texts, int count, const gc_tensor *want_ids,
                      const gc_tensor *want_mask, const char *what) {
    gc_tensor *ids, *mask;
    REQUIRE(gc_tokenize(tokenizer, texts, count, 512, GC_PAD_TO_LONGEST, GC_F32, gc_cpu(), &ids, &mask) == GC_OK);
    CHECK_MSG(gc_test_expect_close(want_ids, ids, 0, 0, what) == 0 && gc_test_expect_close(want_mask, mask, 0, 0, what) == 0,
              "%s", what);
    RELEASE(ids, mask);
}

/* config.json edited to sizes the weights do not fit is refused from the header alone, with
 * nothing allocated (a loader that builds first spends minutes and gigabytes on these, and
 * runs 5 layers of the 6 as if they were the model). */
static void check_refusals(const char *model) {
    static const char *const edits[][3] = {
        {"\"num_hidden_layers\": 6", "\"num_hidden_layers\": 1000",
         "15904 weights of the encoder %s describes (num_hidden_layers 1000) are missing: "
         "encoder.layer.6.attention.self.query.weight, "},
        {"\"intermediate_size\": 1536", "\"intermediate_size\": 1000000",
         "weight 'encoder.layer.0.intermediate.dense.weight' is [1536, 384], but %s (intermediate_size 1000000, "
         "hidden_size 384) describes [1000000, 384]"},
        {"\"max_position_embeddings\": 512", "\"max_position_embeddings\": 1000000",
         "weight 'embeddings.position_embeddings.weight' is [512, 384], but %s (max_position_embeddings 1000000, "
         "hidden_size 384) describes [1000000, 384]"},
        {"\"num_hidden_layers\": 6", "\"num_hidden_layers\": 5",
         "16 weights of the encoder are unused by %s (num_hidden_layers 5, type_vocab_size 2): encoder.layer.5."},
    };
    gc_test_expect_edits_refused(model, edits, sizeof edits / sizeof *edits);
}

int main(void) {
    char weights[4096];
    snprintf(weights, sizeof weights, "%s/model.safetensors", model_folder());
    struct stat info;
    if (stat(weights, &info) != 0) {
        fprintf(stderr, "skip: no %s (fetch it with `gradcache model fetch minilm`)\n", weights);
        return GC_TEST_SKIP;
    }
    check_refusals(model_folder());
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused;
    REQUIRE(gc_bert_load(model_folder(), gc_cpu(), &encoder, &tokenizer, &unused) == GC_OK);
    CHECK(encoder.config.dim == 384 && encoder.config.layers == 6 && encoder.config.normalize);
    CHECK_MSG(unused.count == 3, "%d unused: %s", unused.count, unused.names); /* pooler and position_ids */
    gc_param_list fixture = gc_fixture_load(GC_TEST_FIXTURES "/bert_minilm_v1.bin");
    gc_tensor *ids = gc_fixture_get(&fixture, "ids"), *mask = gc_fixture_get(&fixture, "mask");
    char **texts = fixture_texts();
    check_ids(tokenizer, (const char *const *)texts, TEXTS, ids, mask, "fixture strings' ids");
    gc_tensor *want = gc_cast(gc_fixture_get(&fixture, "embeddings"), GC_F32);
    check_embeddings(&encoder, ids, mask, want, "MiniLM embeddings");

    gc_tensor *pair_ids = gc_fixture_get(&fixture, "pair_ids"), *pair_mask = gc_fixture_get(&fixture, "pair_mask");
    const char *pair_texts[16]; /* definition, word, definition, ...: the fixture's rows */
    for (int i = 0; i < 8; i++) pair_texts[2 * i] = texts[TEXTS + i], pair_texts[2 * i + 1] = texts[TEXTS + 8 + i];
    check_ids(tokenizer, pair_texts, 16, pair_ids, pair_mask, "pairs' ids");
    /* the gradient of 8 definitions against their words, each side tokenized on its own (the
     * reference padded all 16 rows to one length: padding is masked out, so it cannot matter) */
    const char *const *definitions = (const char *const *)texts + TEXTS, *const *words = definitions + 8;
    gc_tensor *q_ids, *q_mask, *p_ids, *p_mask;
    REQUIRE(gc_tokenize(tokenizer, definitions, 8, 512, GC_PAD_TO_LONGEST, GC_F32, gc_cpu(), &q_ids, &q_mask) == GC_OK);
    REQUIRE(gc_tokenize(tokenizer, words, 8, 512, GC_PAD_TO_LONGEST, GC_F32, gc_cpu(), &p_ids, &p_mask) == GC_OK);
    int compared = check_gradients(&encoder, q_ids, q_mask, p_ids, p_mask, &fixture);
    CHECK_MSG(compared == 6, "compared %d gradients", compared);
    RELEASE(q_ids, q_mask, p_ids, p_mask);
    for (int i = 0; i < TEXTS + 16; i++) free(texts[i]);
    free(texts);
    gc_tensor_release(want);
    gc_param_list_free(&fixture);
    gc_bert_unused_free(&unused);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&encoder);
    return gc_test_result();
}
