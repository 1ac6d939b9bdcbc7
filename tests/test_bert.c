/* The BERT loader on tests/fixtures/tiny_bert (a BERT-shaped random model in the Hugging Face
 * layout, tests/make_bert_fixture.py): the configuration; the weights under their names, the
 * unused ones reported and kept; embeddings and contrastive-loss gradients against PyTorch;
 * saving back under the same names; and bad folders refused with the file and the problem,
 * before anything is built: a config.json of impossible sizes, or one that the weights do not
 * fit (more layers or wider ones than the file holds, or fewer than it has). */
#include <sys/stat.h>

#include "bert_check.h"
#include "bert_folders.h"

#define TINY GC_TEST_FIXTURES "/tiny_bert"

static void test_config(void) {
    gc_text_encoder_config c;
    REQUIRE(gc_bert_read_config(TINY, &c) == GC_OK);
    CHECK(c.vocab == 64 && c.max_length == 24 && c.type_vocab == 2 && c.dim == 32 && c.heads == 4 && c.layers == 2);
    CHECK(c.hidden == 64 && c.projection == 0 && !c.pre_norm && c.activation == GC_ACT_GELU_ERF);
    CHECK(c.pooling == GC_POOL_MEAN && c.normalize && c.dropout == 0.1 && c.layernorm_eps == 1e-12);
    CHECK(c.dtype == GC_F32);
}

static void test_names(void) {
    char name[GC_PARAM_NAME_MAX];
    CHECK(gc_bert_weight_name("embeddings.tokens.weight", name) && !strcmp(name, "embeddings.word_embeddings.weight"));
    CHECK(gc_bert_weight_name("layers.11.attention.query.bias", name) &&
          !strcmp(name, "encoder.layer.11.attention.self.query.bias"));
    CHECK(gc_bert_weight_name("layers.0.mlp_norm.weight", name) && !strcmp(name, "encoder.layer.0.output.LayerNorm.weight"));
    CHECK(gc_bert_weight_name("layers.2.mlp.in.weight", name) && !strcmp(name, "encoder.layer.2.intermediate.dense.weight"));
    CHECK(!gc_bert_weight_name("projection.weight", name) && !gc_bert_weight_name("layers.1.mlp.in.scale", name));
    CHECK(!gc_bert_weight_name("layers.x.mlp.in.weight", name));
}

static void test_parity(void) {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused;
    REQUIRE(gc_bert_load(TINY, gc_cpu(), &encoder, &tokenizer, &unused) == GC_OK);
    CHECK(gc_tokenizer_vocab_size(tokenizer) == 64);
    /* BertModel's files carry the pooler (kept, to be written back) and position_ids (I64) */
    CHECK_MSG(unused.count == 3 && unused.kept.count == 2 && gc_param_list_find(&unused.kept, "pooler.dense.weight") &&
                  strstr(unused.names, "embeddings.position_ids"),
              "%d unused: %s", unused.count, unused.names);
    gc_param_list fixture = gc_fixture_load(GC_TEST_FIXTURES "/bert_tiny_v1.bin");
    gc_tensor *ids = gc_fixture_get(&fixture, "ids"), *mask = gc_fixture_get(&fixture, "mask");
    gc_tensor *want = gc_cast(gc_fixture_get(&fixture, "embeddings"), GC_F32);
    check_embeddings(&encoder, ids, mask, want, "tiny embeddings");
    gc_tensor *q_ids = gc_slice0(ids, 0, 4), *q_mask = gc_slice0(mask, 0, 4);
    gc_tensor *p_ids = gc_slice0(ids, 4, 8), *p_mask = gc_slice0(mask, 4, 8);
    int compared = check_gradients(&encoder, q_ids, q_mask, p_ids, p_mask, &fixture);
    CHECK_MSG(compared == 2 * 16 + 5, "compared %d gradients", compared); /* every weight */
    RELEASE(want, q_ids, q_mask, p_ids, p_mask);
    gc_param_list_free(&fixture);
    gc_bert_unused_free(&unused);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&encoder);
}

/* Saving writes every weight back under the file's own name, bit for bit, and the pooler. */
static void test_save(void) {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused;
    REQUIRE(gc_bert_load(TINY, gc_cpu(), &encoder, &tokenizer, &unused) == GC_OK);
    char folder[PATH_MAX], path[PATH_MAX];
    gc_test_make_folder(folder);
    REQUIRE(gc_bert_save_weights(gc_test_path(path, folder, "model.safetensors"), &encoder, &unused) == GC_OK);
    gc_safetensors *original, *saved;
    REQUIRE(gc_safetensors_open(TINY "/model.safetensors", &original) == GC_OK);
    REQUIRE(gc_safetensors_open(path, &saved) == GC_OK);
    CHECK(gc_safetensors_count(saved) == gc_safetensors_count(original) - 1); /* all but position_ids */
    CHECK(gc_safetensors_metadata(saved, "format") && !strcmp(gc_safetensors_metadata(saved, "format"), "pt"));
    for (int i = 0; i < gc_safetensors_count(saved); i++) {
        const char *name = gc_safetensors_name(saved, i);
        gc_tensor *a = gc_safetensors_get(original, name, gc_cpu()), *b = gc_safetensors_get(saved, name, gc_cpu());
        CHECK_MSG(a && b && gc_test_expect_close(a, b, 0, 0, name) == 0, "%s", name);
        RELEASE(a, b);
    }
    gc_safetensors_close(original);
    gc_safetensors_close(saved);
    REQUIRE(unlink(path) == 0);
    gc_test_remove_folder(folder);
    gc_bert_unused_free(&unused);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&encoder);
}

/* --- bad folders: each a copy of the tiny model with one thing wrong --- */

static void copy_file(const char *from, const char *to) {
    size_t size;
    unsigned char *bytes = gc_test_read_bytes(from, &size);
    REQUIRE(bytes);
    gc_test_write_bytes(to, bytes, size);
    free(bytes);
}

static void write_text(const char *folder, const char *name, const char *text) {
    char path[PATH_MAX];
    gc_test_write_bytes(gc_test_path(path, folder, name), text, strlen(text));
}

/* A copy of the tiny model's config.json, tokenizer.json and model.safetensors in `folder`. */
static void copy_tiny(const char *folder) {
    static const char *const files[] = {"config.json", "tokenizer.json", "model.safetensors"};
    char to[PATH_MAX];
    for (int i = 0; i < 3; i++) {
        char from[PATH_MAX];
        copy_file(gc_test_path(from, TINY, files[i]), gc_test_path(to, folder, files[i]));
    }
}

static void remove_tiny(const char *folder) {
    static const char *const files[] = {"config.json", "tokenizer.json", "model.safetensors"};
    char path[PATH_MAX];
    for (int i = 0; i < 3; i++) unlink(gc_test_path(path, folder, files[i]));
    gc_test_remove_folder(folder);
}

/* Every refusal comes before anything is built (bert_folders.h). */
#define expect_refused gc_test_expect_load_refused

/* The tiny model's weights with `name` replaced by `tensor` (dropped for NULL, added when the
 * file has no such weight). */
static void write_weights(const char *folder, const char *name, gc_tensor *tensor) {
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(TINY "/model.safetensors", &file) == GC_OK);
    gc_param_list list = {0};
    for (int i = 0; i < gc_safetensors_count(file); i++) {
        const char *entry = gc_safetensors_name(file, i);
        gc_tensor *t = strcmp(entry, name) ? gc_safetensors_get(file, entry, gc_cpu())
                                           : tensor ? gc_tensor_retain(tensor) : NULL;
        if (t) gc_param_list_add(&list, "", entry, t, false); /* position_ids (I64) cannot be read: left out */
        gc_tensor_release(t);
        gc_clear_error();
    }
    if (tensor && !gc_param_list_find(&list, name)) gc_param_list_add(&list, "", name, tensor, false);
    char path[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "model.safetensors"), &list, NULL) == GC_OK);
    gc_param_list_free(&list);
    gc_safetensors_close(file);
}

static void test_refused(void) {
    char folder[PATH_MAX];
    gc_test_make_folder(folder);
    expect_refused(folder, GC_ERR_IO, "config.json", "cannot open");
    copy_tiny(folder);
    write_text(folder, "config.json", "{\"model_type\": \"roberta\", \"vocab_size\": 64}");
    expect_refused(folder, GC_ERR_FORMAT, "config.json", "\"model_type\" is \"roberta\", not one of the supported \"bert\"");
    write_text(folder, "config.json", "{\"architectures\": [\"BertModel\"]}");
    expect_refused(folder, GC_ERR_FORMAT, "config.json", "no \"model_type\"");
    write_text(folder, "config.json", "{\"model_type\": \"bert\", \"vocab_size\": 64,");
    expect_refused(folder, GC_ERR_FORMAT, "config.json", "not valid JSON");
    copy_tiny(folder);
    write_text(folder, "tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
    expect_refused(folder, GC_ERR_FORMAT, "tokenizer.json", "model type \"Unigram\" is neither WordPiece");
    copy_tiny(folder);
    char config[PATH_MAX], problem[PATH_MAX + 200];
    gc_test_path(config, folder, "config.json");
    gc_tensor *wrong = gc_zeros(GC_SHAPE(32, 31), GC_F32, gc_cpu());
    write_weights(folder, "encoder.layer.1.attention.self.key.weight", wrong);
    snprintf(problem, sizeof problem, "weight 'encoder.layer.1.attention.self.key.weight' is [32, 31], but %s "
             "(hidden_size 32) describes [32, 32]", config);
    expect_refused(folder, GC_ERR_FORMAT, "model.safetensors", problem);
    gc_tensor *integers = gc_zeros(GC_SHAPE(32), GC_I32, gc_cpu());
    write_weights(folder, "embeddings.LayerNorm.bias", integers);
    expect_refused(folder, GC_ERR_FORMAT, "model.safetensors",
                   "weight 'embeddings.LayerNorm.bias' is I32, not a floating-point dtype");
    write_weights(folder, "encoder.layer.0.output.dense.bias", NULL);
    snprintf(problem, sizeof problem, "1 weight of the encoder %s describes (num_hidden_layers 2) is missing: "
             "encoder.layer.0.output.dense.bias", config);
    expect_refused(folder, GC_ERR_FORMAT, "model.safetensors", problem);
    /* a weight of the encoder that no configuration has: a model this loader does not know */
    write_weights(folder, "encoder.layer.0.attention.self.extra.weight", integers);
    snprintf(problem, sizeof problem, "1 weight of the encoder is unused by %s (num_hidden_layers 2, type_vocab_size "
             "2): encoder.layer.0.attention.self.extra.weight", config);
    expect_refused(folder, GC_ERR_FORMAT, "model.safetensors", problem);
    write_text(folder, "model.safetensors", "not a safetensors file");
    expect_refused(folder, GC_ERR_FORMAT, "model.safetensors", "header of");
    RELEASE(wrong, integers);
    remove_tiny(folder);
}

/* config.json's sizes that cannot describe a BERT are refused, naming the field and the value
 * (no layer, no token type: BertModel adds type 0 to every token; heads that do not divide the
 * width). */
static void test_config_values(void) {
    static const char *const edits[][3] = {
        {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0", "\"num_hidden_layers\" is 0, outside [1, 1000]"},
        {"\"type_vocab_size\": 2", "\"type_vocab_size\": 0", "\"type_vocab_size\" is 0, outside [1, 1000000]"},
        {"\"num_attention_heads\": 4", "\"num_attention_heads\": 5", "hidden_size 32 does not split into 5 heads"},
        {"\"intermediate_size\": 64", "\"intermediate_size\": 6.5", "\"intermediate_size\" is 6.5, not an integer"},
        {"\"vocab_size\": 64", "\"vocab_size\": -1", "\"vocab_size\" is -1, outside [1, 2147483647]"},
        {"\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": 0", "\"layer_norm_eps\" is 0, outside [1e-30, 1)"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char folder[PATH_MAX];
        gc_test_edited_folder(folder, TINY, edits[i][0], edits[i][1]);
        expect_refused(folder, GC_ERR_FORMAT, "config.json", edits[i][2]);
        gc_test_remove_edited_folder(folder);
    }
}

/* A config.json that the file's weights do not fit is refused from the header of
 * model.safetensors, before the model is built: sizes that would make it huge (the weights
 * missing, or of another shape), and sizes that leave some of the file's encoder out, which
 * would silently run another model (the pooler and position_ids are no part of the encoder:
 * test_parity). */
static void test_config_against_weights(void) {
    static const char *const edits[][3] = {
        {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000",
         "15968 weights of the encoder %s describes (num_hidden_layers 1000) are missing: "
         "encoder.layer.2.attention.self.query.weight, encoder.layer.2.attention.self.query.bias, "},
        {"\"intermediate_size\": 64", "\"intermediate_size\": 1000000",
         "weight 'encoder.layer.0.intermediate.dense.weight' is [64, 32], but %s (intermediate_size 1000000, "
         "hidden_size 32) describes [1000000, 32]"},
        {"\"max_position_embeddings\": 24", "\"max_position_embeddings\": 1000000",
         "weight 'embeddings.position_embeddings.weight' is [24, 32], but %s (max_position_embeddings 1000000, "
         "hidden_size 32) describes [1000000, 32]"},
        {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1",
         "16 weights of the encoder are unused by %s (num_hidden_layers 1, type_vocab_size 2): "
         "encoder.layer.1.attention.output.LayerNorm.bias, "},
        {"\"vocab_size\": 64", "\"vocab_size\": 65",
         "weight 'embeddings.word_embeddings.weight' is [64, 32], but %s (vocab_size 65, hidden_size 32) describes "
         "[65, 32]"},
    };
    gc_test_expect_edits_refused(TINY, edits, sizeof edits / sizeof *edits);
}

int main(void) {
    test_config();
    test_names();
    test_parity();
    test_save();
    test_refused();
    test_config_values();
    test_config_against_weights();
    return gc_test_result();
}
