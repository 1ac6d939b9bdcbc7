/* What the decoder-family loader refuses of a folder, before anything is built: config.json's
 * fields (an unknown model_type or rotary scaling, heads that do not split, a size the weights
 * do not have, more layers than the file, a wrong bias setting, Qwen2's sliding windows, a
 * Mistral window that is not a positive integer) and a sharded index (a shard
 * outside the folder, a weight not in the shard it names, a weight in two shards), each in
 * one line naming the file, the field or weight and the values, with nothing allocated. */
#include <unistd.h>

#include "bert_folders.h"

#define QWEN2 GC_TEST_FIXTURES "/tiny_qwen2"
#define LLAMA GC_TEST_FIXTURES "/tiny_llama"
#define MISTRAL GC_TEST_FIXTURES "/tiny_mistral"

static void expect_refused(const char *folder, gc_status want, const char *file, const char *problem) {
    gc_test_expect_refused_by(gc_pretrained_load, folder, want, file, problem);
}

static void test_config_refusals(void) {
    static const char *const edits[][3] = {
        {"\"model_type\": \"qwen2\"", "\"model_type\": \"gemma\"",
         "config.json: \"model_type\" is \"gemma\", not one of the supported \"bert\", \"llama\", \"mistral\", "
         "\"qwen2\", \"qwen3\""},
        {"\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"",
         "config.json: \"rope_parameters.rope_type\" is \"yarn\", a rotary scaling gradcache does not implement"},
        {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3",
         "config.json: num_attention_heads 4 does not split into num_key_value_heads 3"},
        {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"",
         "config.json: \"hidden_act\" is \"gelu\", not one of the supported \"silu\""},
        {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000",
         "model.safetensors: 11976 weights of the encoder %s describes (num_hidden_layers 1000) are missing"},
        {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1",
         "model.safetensors: 12 weights of the encoder are unused by %s (num_hidden_layers 1, biases of q/k/v yes"},
        {"\"intermediate_size\": 48", "\"intermediate_size\": 4800",
         "model.safetensors: weight 'model.layers.0.mlp.gate_proj.weight' is [48, 32], but %s (intermediate_size "
         "4800, hidden_size 32) describes [4800, 32]"},
        {"\"model_type\": \"qwen2\"", "\"model_type\": \"llama\"",
         "model.safetensors: 6 weights of the encoder are unused by %s (num_hidden_layers 2, biases of q/k/v no"},
        {"\"use_sliding_window\": false", "\"use_sliding_window\": true",
         "config.json: \"use_sliding_window\" is true: gradcache implements Mistral's sliding window on every layer, "
         "not this model_type's windows from max_window_layers on"},
        {"\"sliding_window\": 4", "\"sliding_window\": 0", "config.json: \"sliding_window\" is 0, outside [1, "},
        {"\"sliding_window\": 4", "\"sliding_window\": \"4\"", "config.json: \"sliding_window\" is a string"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char folder[PATH_MAX], config[PATH_MAX], problem[PATH_MAX + 300];
        /* the last two edits are of Mistral's window, the others of the Qwen2 folder */
        bool mistral = strstr(edits[i][0], "\"sliding_window\": 4") != NULL;
        gc_test_edited_folder(folder, mistral ? MISTRAL : QWEN2, edits[i][0], edits[i][1]);
        snprintf(problem, sizeof problem, edits[i][2], gc_test_path(config, folder, "config.json"));
        const char *file = strncmp(edits[i][2], "config.json", 11) == 0 ? "config.json" : "model.safetensors";
        expect_refused(folder, GC_ERR_FORMAT, file, strchr(problem, ':') + 2);
        gc_test_remove_edited_folder(folder);
    }
}

/* The Llama folder's shards linked into a new folder with an edited index. */
static void test_index_refusals(void) {
    static const char *const shards[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                         "model-00003-of-00003.safetensors", "config.json", "tokenizer.json"};
    static const char *const edits[][3] = {
        {"\"model.norm.weight\": \"model-00002", "\"model.norm.weight\": \"../model-00002",
         "weight_map names the shard \"../model-00002-of-00003.safetensors\", not a file name of the folder"},
        {"\"lm_head.weight\": \"model-00003", "\"lm_head.weight\": \"model-00001",
         "weight 'lm_head.weight' is not in "},
        {"\"weight_map\"", "\"weights\"", "no \"weight_map\" object of weights and shards"},
    };
    for (size_t e = 0; e < sizeof edits / sizeof *edits; e++) {
        char folder[PATH_MAX], source[PATH_MAX], link[PATH_MAX];
        gc_test_make_folder(folder);
        for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
            REQUIRE(symlink(gc_test_path(source, LLAMA, shards[i]), gc_test_path(link, folder, shards[i])) == 0);
        size_t size;
        unsigned char *bytes = gc_test_read_bytes(gc_test_path(source, LLAMA, "model.safetensors.index.json"), &size);
        char *text = calloc(size + 64, 1), *at;
        REQUIRE(bytes && text);
        memcpy(text, bytes, size);
        REQUIRE((at = strstr(text, edits[e][0])));
        size_t from = strlen(edits[e][0]), to = strlen(edits[e][1]);
        memmove(at + to, at + from, strlen(at + from) + 1);
        memcpy(at, edits[e][1], to);
        gc_test_write_bytes(gc_test_path(link, folder, "model.safetensors.index.json"), text, strlen(text));
        expect_refused(folder, GC_ERR_FORMAT, "model.safetensors.index.json", edits[e][2]);
        for (size_t i = 0; i < sizeof shards / sizeof *shards; i++) unlink(gc_test_path(link, folder, shards[i]));
        unlink(gc_test_path(link, folder, "model.safetensors.index.json"));
        gc_test_remove_folder(folder);
        free(bytes);
        free(text);
    }
}

/* A weight in two shards: the first shard with a copy of lm_head added, which the third shard
 * holds too; each weight of the index is in the shard it names. */
static void test_weight_in_two_shards(void) {
    static const char *const files[] = {"model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                        "config.json", "tokenizer.json", "model.safetensors.index.json"};
    char folder[PATH_MAX], source[PATH_MAX], link[PATH_MAX];
    gc_test_make_folder(folder);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        REQUIRE(symlink(gc_test_path(source, LLAMA, files[i]), gc_test_path(link, folder, files[i])) == 0);
    gc_param_list first = {0};
    gc_safetensors *real;
    REQUIRE(gc_safetensors_open(gc_test_path(source, LLAMA, "model-00001-of-00003.safetensors"), &real) == GC_OK);
    for (int i = 0; i < gc_safetensors_count(real); i++) {
        gc_tensor *t = gc_safetensors_get(real, gc_safetensors_name(real, i), gc_cpu());
        gc_param_list_add(&first, "", gc_safetensors_name(real, i), t, false);
        gc_tensor_release(t);
    }
    gc_safetensors_close(real);
    gc_tensor *small = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu());
    gc_param_list_add(&first, "", "lm_head.weight", small, false);
    REQUIRE(gc_safetensors_save_plain(gc_test_path(link, folder, "model-00001-of-00003.safetensors"), &first, NULL) ==
            GC_OK);
    expect_refused(folder, GC_ERR_FORMAT, "model.safetensors.index.json", "weight 'lm_head.weight' is in both");
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(gc_test_path(link, folder, files[i]));
    unlink(gc_test_path(link, folder, "model-00001-of-00003.safetensors"));
    gc_test_remove_folder(folder);
    gc_param_list_free(&first);
    gc_tensor_release(small);
}

int main(void) {
    GC_TEST_CASE(test_config_refusals);
    GC_TEST_CASE(test_index_refusals);
    GC_TEST_CASE(test_weight_in_two_shards);
    return gc_test_result();
}
