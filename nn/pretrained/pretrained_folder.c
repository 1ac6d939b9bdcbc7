/* A model folder in the Hugging Face layout, either family (include/gradcache/pretrained.h):
 * config.json by its model_type, sentence-transformers' pooling and normalisation, the check
 * of the configuration against the headers of the weights before anything is built, the
 * whole load, and a folder written back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/files.h"
#include "nn/pretrained/pretrained_internal.h"

/* dir + "/" + name, in `path` (PATH_MAX-sized buffers are enough for any real folder). */
static const char *join(char *path, size_t size, const char *dir, const char *name) {
    if ((size_t)snprintf(path, size, "%s/%s", dir, name) >= size)
        gc_fatal("pretrained: the path '%s/%s' is longer than %zu bytes", dir, name, size - 1);
    return path;
}

gc_status gc_pretrained_read_optional(const char *dir, const char *name, char path[4096], gc_json **document) {
    struct stat info;
    *document = NULL;
    if (stat(join(path, 4096, dir, name), &info) != 0) return GC_OK;
    return gc_json_file_read(path, GC_BERT_MAX_CONFIG, document);
}

/* config.json's family by its model_type, `only` (or either when NULL). A model_type of
 * neither family is refused here, naming every type either reader takes (each reader checks
 * its own again), so that the message does not send a user to the wrong family's list. */
static gc_status read_family(const char *path, const gc_json *config, const gc_layout *only,
                             gc_text_encoder_config *c) {
    static const char *const model_types[] = {"bert", "llama", "mistral", "qwen2", "qwen3", NULL};
    const gc_json *type = gc_json_member(config, "model_type");
    int family = -1;
    *c = (gc_text_encoder_config){.pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_status status = only || config->type != GC_JSON_OBJECT
                           ? GC_OK
                           : gc_config_choice(path, config, "model_type", model_types, -1, &family);
    if (status != GC_OK) return status;
    if (only == &gc_bert_layout || (!only && (family == 0 || !type))) return gc_bert_config_read(path, config, c);
    return gc_decoder_config_read(path, config, c);
}

gc_status gc_pretrained_parse_config(const char *text, size_t length, const char *name,
                                     gc_text_encoder_config *config) {
    gc_json *document;
    *config = (gc_text_encoder_config){.pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_status status = gc_json_file_parse(name, text, length, &document);
    if (status == GC_OK) status = read_family(name, document, NULL, config);
    gc_json_free(document);
    return status;
}

/* 1_Pooling/config.json: mean, CLS or last-token pooling (sentence-transformers' other modes
 * are refused); without it, the family's own (mean for BERT, last token for a decoder). */
static gc_status read_pooling(const char *dir, gc_text_encoder_config *c) {
    char path[4096];
    gc_json *pooling;
    gc_status status = gc_pretrained_read_optional(dir, "1_Pooling/config.json", path, &pooling);
    if (status != GC_OK || !pooling) return status;
    static const char *const modes[] = {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_lasttoken",
                                        "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                                        "pooling_mode_weightedmean_tokens"};
    int chosen = -1, count = 0;
    for (int i = 0; i < 6; i++) {
        const gc_json *mode = gc_json_member(pooling, modes[i]);
        if (mode && mode->type == GC_JSON_BOOL && mode->boolean) chosen = i, count++;
    }
    if (count != 1 || chosen > 2)
        status = gc_json_file_error(path, "pooling must be exactly one of pooling_mode_mean_tokens, "
                                    "pooling_mode_cls_token and pooling_mode_lasttoken");
    else c->pooling = (gc_pooling)chosen; /* the order of gc_pooling */
    gc_json_free(pooling);
    return status;
}

/* modules.json: a sentence_transformers.models.Normalize module normalises the output. */
static gc_status read_modules(const char *dir, gc_text_encoder_config *c) {
    char path[4096];
    gc_json *modules;
    gc_status status = gc_pretrained_read_optional(dir, "modules.json", path, &modules);
    if (status != GC_OK || !modules) return status;
    if (modules->type != GC_JSON_ARRAY) status = gc_json_file_error(path, "not a JSON array");
    for (const gc_json *module = modules->first; status == GC_OK && module; module = module->next) {
        const gc_json *type = gc_json_member(module, "type");
        if (type && type->type == GC_JSON_STRING && strcmp(type->string, "sentence_transformers.models.Normalize") == 0)
            c->normalize = true;
    }
    gc_json_free(modules);
    return status;
}

gc_status gc_pretrained_folder_config(const char *dir, const gc_layout *only, gc_text_encoder_config *config) {
    char path[4096];
    *config = (gc_text_encoder_config){.pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_json *document;
    gc_status status = gc_json_file_read(join(path, sizeof path, dir, "config.json"), GC_BERT_MAX_CONFIG, &document);
    if (status != GC_OK) return status;
    status = read_family(path, document, only, config);
    gc_json_free(document);
    if (status == GC_OK) status = read_pooling(dir, config);
    if (status == GC_OK) status = read_modules(dir, config);
    /* the headers of the weights against the configuration: no tensor data read, nothing built */
    gc_weight_files files;
    if (status == GC_OK && (status = gc_weight_files_open(dir, &files)) == GC_OK) {
        status = gc_layout_check(gc_layout_of(config), &files, config, path);
        gc_weight_files_close(&files);
    }
    return status;
}

gc_status gc_pretrained_read_config(const char *dir, gc_text_encoder_config *config) {
    return gc_pretrained_folder_config(dir, NULL, config);
}

gc_status gc_pretrained_check_weights(const gc_safetensors *file, const gc_text_encoder_config *config,
                                      const char *config_name) {
    const gc_layout *layout = gc_layout_of(config);
    if (!layout) gc_fatal("pretrained_check_weights: the configuration has no Hugging Face layout");
    return gc_layout_check(layout, &(gc_weight_files){.files = (gc_safetensors **)&file, .count = 1}, config,
                           config_name);
}

gc_status gc_pretrained_load_tokenizer(const char *dir, const gc_text_encoder_config *config,
                                       gc_tokenizer **tokenizer) {
    char path[4096];
    gc_status status = gc_tokenizer_load(join(path, sizeof path, dir, "tokenizer.json"), tokenizer);
    if (status == GC_OK && gc_tokenizer_vocab_size(*tokenizer) > config->vocab) {
        gc_set_error(GC_ERR_FORMAT, "%s: %lld tokens, more than the vocab_size %lld of config.json", path,
                     (long long)gc_tokenizer_vocab_size(*tokenizer), (long long)config->vocab);
        gc_tokenizer_free(*tokenizer);
        *tokenizer = NULL;
        status = GC_ERR_FORMAT;
    }
    return status;
}

static gc_status load(const char *dir, const gc_layout *only, gc_device device, gc_text_encoder *encoder,
                      gc_tokenizer **tokenizer, gc_bert_unused *unused) {
    *encoder = (gc_text_encoder){0};
    *tokenizer = NULL;
    if (unused) *unused = (gc_bert_unused){0};
    gc_text_encoder_config config;
    gc_status status = gc_pretrained_folder_config(dir, only, &config);
    if (status == GC_OK) status = gc_pretrained_load_tokenizer(dir, &config, tokenizer);
    /* no random draws: the file holds every weight (gc_layout_check refuses one that lacks any) */
    if (status == GC_OK) status = gc_text_encoder_init(encoder, &config, device, NULL);
    if (status == GC_OK && (status = gc_pretrained_load_weights(dir, encoder, unused)) != GC_OK)
        gc_text_encoder_free(encoder);
    if (status != GC_OK) {
        gc_tokenizer_free(*tokenizer);
        *tokenizer = NULL;
    }
    return status;
}

gc_status gc_bert_load(const char *dir, gc_device device, gc_text_encoder *encoder, gc_tokenizer **tokenizer,
                       gc_bert_unused *unused) {
    return load(dir, &gc_bert_layout, device, encoder, tokenizer, unused);
}

gc_status gc_pretrained_load(const char *dir, gc_device device, gc_text_encoder *encoder, gc_tokenizer **tokenizer,
                             gc_bert_unused *unused) {
    return load(dir, NULL, device, encoder, tokenizer, unused);
}

gc_status gc_pretrained_prompt(const char *dir, const char *name, char **prompt) {
    char path[4096];
    *prompt = NULL;
    gc_json *document;
    gc_status status = gc_pretrained_read_optional(dir, "config_sentence_transformers.json", path, &document);
    if (status != GC_OK || !document) return status;
    const gc_json *prompts = gc_json_member(document, "prompts");
    const gc_json *text = gc_json_member(prompts, name);
    if (prompts && prompts->type != GC_JSON_OBJECT) status = gc_json_file_error(path, "\"prompts\" is not an object");
    else if (text && text->type != GC_JSON_STRING)
        status = gc_json_file_error(path, "prompts.%.40s is %s, not a string", name, gc_json_type_name(text->type));
    else if (text && !(*prompt = malloc(strlen(text->string) + 1))) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
        status = GC_ERR_OUT_OF_MEMORY;
    }
    if (status == GC_OK && text) strcpy(*prompt, text->string);
    gc_json_free(document);
    return status;
}
