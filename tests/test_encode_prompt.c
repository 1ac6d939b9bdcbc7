/* What `gradcache encode` writes before its texts and where it cuts them, through the library
 * calls it makes (gc_dual_encoder_from_folder, gc_dual_encoder_choose_prompt,
 * gc_encode_texts_with):
 *  - the tiny Qwen3 folder's "query" prompt gives sentence-transformers' encode(...,
 *    prompt_name="query") (tests/make_prompt_fixture.py), the same prompt given as text the
 *    same bits, the folder's default_prompt_name that prompt when neither is given; an unknown
 *    name, a name for a model that is no folder, a bad default_prompt_name and a prompt that
 *    leaves no room for text refused;
 *  - without --max-length, a folder's sentence_bert_config.json max_seq_length is the length
 *    (a long text's embedding is the one cut there), at most the model's positions, 128 when
 *    it has none, and a malformed one refused naming the file. */
#include <string.h>
#include <unistd.h>

#include "bert_folders.h"
#include "fixture.h"
#include "gradcache/train.h"

#define QWEN3 GC_TEST_FIXTURES "/tiny_qwen3"
#define BERT GC_TEST_FIXTURES "/tiny_bert"
#define QUERY_PROMPT "Instruct: Given a question, find its answer\nQuery:"

/* The queries of make_prompt_fixture.py. */
static const char *const queries[] = {"what is it?", "Hello world", "a", "the cat sat, naïve café", "東京 123 😀!"};
enum { QUERIES = 5 };

/* The files both tiny folders have besides sentence-transformers' two configurations. */
static const char *const linked[] = {"config.json", "model.safetensors", "tokenizer.json", "modules.json", "1_Pooling"};
enum { LINKED = sizeof linked / sizeof *linked };

/* A new folder standing for `source`: its files linked, and `name` holding `content`. */
static void folder_with(char folder[PATH_MAX], const char *source, const char *name, const char *content) {
    char from[PATH_MAX], to[PATH_MAX];
    gc_test_make_folder(folder);
    for (int i = 0; i < LINKED; i++)
        REQUIRE(symlink(gc_test_path(from, source, linked[i]), gc_test_path(to, folder, linked[i])) == 0);
    gc_test_write_bytes(gc_test_path(to, folder, name), content, strlen(content));
}

static void remove_folder_with(const char *folder, const char *name) {
    char path[PATH_MAX];
    for (int i = 0; i < LINKED; i++) unlink(gc_test_path(path, folder, linked[i]));
    unlink(gc_test_path(path, folder, name));
    gc_test_remove_folder(folder);
}

static gc_dual_encoder load(const char *folder, int64_t max_length) {
    gc_dual_encoder model;
    gc_status status = gc_dual_encoder_from_folder(&model, folder, max_length, GC_F32, gc_cpu());
    if (status != GC_OK) fprintf(stderr, "%s\n", gc_last_error());
    REQUIRE(status == GC_OK);
    return model;
}

/* The texts encoded as gradcache encode does, `prompt` (or NULL) before each. */
static gc_tensor *encode(gc_dual_encoder *model, const char *const *texts, int64_t count, const char *prompt,
                         int64_t max_length) {
    gc_encode_options options = {.max_length = max_length ? max_length : model->max_length, .batch = 2,
                                 .prompt = prompt};
    gc_tensor *got = gc_encode_texts_with(gc_dual_encoder_tower(model, 0), model->tokenizer, texts, count, &options);
    REQUIRE(got);
    return got;
}

/* The least cosine of a row of a [N, D] with the same row of b. */
static double least_cosine(const gc_tensor *a, const gc_tensor *b) {
    int64_t rows = a->shape[0], dim = a->shape[1];
    REQUIRE(b->shape[0] == rows && b->shape[1] == dim && rows * dim <= 4096);
    double x[4096], y[4096], least = 1;
    gc_to_host_f64(a, x);
    gc_to_host_f64(b, y);
    for (int64_t r = 0; r < rows; r++) {
        double dot = 0, xx = 0, yy = 0;
        for (int64_t d = 0; d < dim; d++) {
            dot += x[r * dim + d] * y[r * dim + d];
            xx += x[r * dim + d] * x[r * dim + d];
            yy += y[r * dim + d] * y[r * dim + d];
        }
        double cosine = dot / sqrt(xx * yy);
        if (cosine < least) least = cosine;
    }
    return least;
}

/* The bound: cosine >= 0.999999 with sentence-transformers (both f32; the two differ by
 * the order of their sums, ~1e-7 relative, and a prompt missing or wrong drops it far below). */
static void test_query_prompt(void) {
    gc_param_list fixture = gc_fixture_load(GC_TEST_FIXTURES "/prompt_qwen3_v1.bin");
    gc_tensor *want = gc_fixture_get(&fixture, "query");
    gc_dual_encoder model = load(QWEN3, 0);
    char *named, *given, *none;
    REQUIRE(gc_dual_encoder_choose_prompt(&model, "query", NULL, &named) == GC_OK && named);
    CHECK(strcmp(named, QUERY_PROMPT) == 0);
    REQUIRE(gc_dual_encoder_choose_prompt(&model, NULL, QUERY_PROMPT, &given) == GC_OK);
    REQUIRE(gc_dual_encoder_choose_prompt(&model, NULL, NULL, &none) == GC_OK); /* default_prompt_name: null */
    CHECK(none == NULL);
    gc_tensor *prompted = encode(&model, queries, QUERIES, named, 0);
    gc_tensor *as_text = encode(&model, queries, QUERIES, given, 0);
    gc_tensor *plain = encode(&model, queries, QUERIES, none, 0);
    double cosine = least_cosine(want, prompted), unprompted = least_cosine(want, plain);
    CHECK_MSG(cosine >= 0.999999, "prompt_name=\"query\": least cosine %.9f with sentence-transformers", cosine);
    CHECK_MSG(unprompted < 0.999, "without the prompt the embeddings still match (least cosine %.9f)", unprompted);
    gc_test_expect_close(prompted, as_text, 0, 0, "the query prompt by name and as text");
    RELEASE(prompted, as_text, plain);
    free(named);
    free(given);
    gc_dual_encoder_free(&model);
    gc_param_list_free(&fixture);
}

/* An error of `want` whose message contains `problem`, and no prompt. */
static void expect_prompt_refused(gc_dual_encoder *model, const char *name, const char *text, gc_status want,
                                  const char *problem) {
    char *prompt = (char *)"untouched";
    gc_status status = gc_dual_encoder_choose_prompt(model, name, text, &prompt);
    CHECK_MSG(status == want && prompt == NULL && strstr(gc_last_error(), problem),
              "prompt %s / %s: status %d, error '%s' (wanted %d, '%s')", name ? name : "-", text ? "text" : "-",
              status, gc_last_error(), want, problem);
}

static void test_refusals(void) {
    gc_dual_encoder model = load(QWEN3, 0);
    expect_prompt_refused(&model, "nope", NULL, GC_ERR_CONFIG,
                          "tiny_qwen3/config_sentence_transformers.json: the prompt \"nope\" is not one of its "
                          "\"prompts\"");
    gc_dual_encoder_free(&model);
    model = load(QWEN3, 4); /* the query prompt is longer than 4 tokens */
    expect_prompt_refused(&model, "query", NULL, GC_ERR_CONFIG, "the \"query\" prompt is 4 tokens or more, leaving "
                          "none of the 4 tokens per text for the text");
    expect_prompt_refused(&model, NULL, QUERY_PROMPT, GC_ERR_CONFIG, "the prompt given is 4 tokens or more");
    gc_dual_encoder_free(&model);
    gc_text_encoder_config preset = gc_model_preset(0, 16); /* a model file's: no folder, no named prompts */
    REQUIRE(gc_dual_encoder_init(&model, &preset, true, gc_cpu(), 1) == GC_OK);
    expect_prompt_refused(&model, "query", NULL, GC_ERR_CONFIG, "prompt \"query\": only a model folder has named "
                          "prompts");
    gc_dual_encoder_free(&model);
    static const char *const bad[][2] = {
        {"{\"prompts\": {\"query\": \"q: \"}, \"default_prompt_name\": \"passage\"}",
         "config_sentence_transformers.json: default_prompt_name \"passage\" is not one of its \"prompts\""},
        {"{\"prompts\": {}, \"default_prompt_name\": 3}",
         "config_sentence_transformers.json: \"default_prompt_name\" is an integer, not a string or null"},
    };
    for (int i = 0; i < 2; i++) {
        char folder[PATH_MAX];
        folder_with(folder, QWEN3, "config_sentence_transformers.json", bad[i][0]);
        model = load(folder, 0);
        expect_prompt_refused(&model, NULL, NULL, GC_ERR_FORMAT, bad[i][1]);
        gc_dual_encoder_free(&model);
        remove_folder_with(folder, "config_sentence_transformers.json");
    }
}

/* default_prompt_name: the prompt it names, written when no other is asked for. */
static void test_default_prompt(void) {
    char folder[PATH_MAX], *prompt;
    folder_with(folder, QWEN3, "config_sentence_transformers.json",
                "{\"prompts\": {\"query\": \"q: \", \"document\": \"\"}, \"default_prompt_name\": \"query\"}");
    gc_dual_encoder model = load(folder, 0);
    REQUIRE(gc_dual_encoder_choose_prompt(&model, NULL, NULL, &prompt) == GC_OK);
    CHECK(prompt && strcmp(prompt, "q: ") == 0);
    free(prompt);
    REQUIRE(gc_dual_encoder_choose_prompt(&model, "document", NULL, &prompt) == GC_OK); /* a name asked wins */
    CHECK(prompt && strcmp(prompt, "") == 0);
    free(prompt);
    gc_dual_encoder_free(&model);
    remove_folder_with(folder, "config_sentence_transformers.json");
}

/* The folder's length when not asked for one; tiny_bert has 24 positions. */
static int64_t default_length(const char *sentence_bert_config, gc_status *status) {
    char folder[PATH_MAX];
    folder_with(folder, BERT, "sentence_bert_config.json", sentence_bert_config);
    gc_dual_encoder model;
    *status = gc_dual_encoder_from_folder(&model, folder, 0, GC_F32, gc_cpu());
    int64_t length = *status == GC_OK ? model.max_length : -1;
    if (*status == GC_OK) gc_dual_encoder_free(&model);
    remove_folder_with(folder, "sentence_bert_config.json");
    return length;
}

static void test_max_seq_length(void) {
    gc_status status;
    CHECK(default_length("{\"max_seq_length\": 16, \"do_lower_case\": false}", &status) == 16 && status == GC_OK);
    CHECK(default_length("{\"max_seq_length\": 256}", &status) == 24 && status == GC_OK); /* the positions cap it */
    CHECK(default_length("{\"do_lower_case\": false}", &status) == 24 && status == GC_OK); /* 128, capped */
    CHECK(default_length("{\"max_seq_length\": \"256\"}", &status) == -1 && status == GC_ERR_FORMAT &&
          strstr(gc_last_error(), "sentence_bert_config.json: \"max_seq_length\" is a string, not an integer"));
    CHECK(default_length("[]", &status) == -1 && status == GC_ERR_FORMAT &&
          strstr(gc_last_error(), "sentence_bert_config.json: not a JSON object"));
    /* a text of 600 words: its embedding is the one of its first 16 tokens, not 24 */
    char folder[PATH_MAX], text[600 * 4 + 1] = "";
    for (int i = 0; i < 600; i++) strcat(text, i % 2 ? "cat " : "the ");
    const char *texts[] = {text};
    folder_with(folder, BERT, "sentence_bert_config.json", "{\"max_seq_length\": 16}");
    gc_dual_encoder model = load(folder, 0), asked = load(folder, 20); /* an asked length wins */
    CHECK(model.max_length == 16 && asked.max_length == 20);
    gc_tensor *got = encode(&model, texts, 1, NULL, 0), *at_16 = encode(&model, texts, 1, NULL, 16);
    gc_tensor *at_24 = encode(&model, texts, 1, NULL, 24);
    gc_test_expect_close(at_16, got, 0, 0, "a long text cut at max_seq_length");
    CHECK_MSG(least_cosine(at_24, got) < 0.999999, "16 and 24 tokens embed alike: the test shows nothing");
    RELEASE(got, at_16, at_24);
    gc_dual_encoder_free(&model);
    gc_dual_encoder_free(&asked);
    remove_folder_with(folder, "sentence_bert_config.json");
}

int main(void) {
    size_t start = gc_memory_get_stats(gc_cpu()).live_bytes;
    GC_TEST_CASE(test_query_prompt);
    GC_TEST_CASE(test_refusals);
    GC_TEST_CASE(test_default_prompt);
    GC_TEST_CASE(test_max_seq_length);
    CHECK_MSG(gc_memory_get_stats(gc_cpu()).live_bytes == start, "tensors left alive");
    return gc_test_result();
}
