/* A BERT folder's configuration: config.json, sentence-transformers' pooling and
 * normalisation, checked against the header of model.safetensors before anything is built
 * (include/gradcache/pretrained.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/text/bert_internal.h"
#include "nn/io/json_file.h"

/* Far beyond any BERT; bounds what a foreign file can make us allocate. */
#define MAX_SIZE 1000000

/* dir + "/" + name, in `path` (PATH_MAX-sized buffers are enough for any real folder). */
static const char *join(char *path, size_t size, const char *dir, const char *name) {
    if ((size_t)snprintf(path, size, "%s/%s", dir, name) >= size)
        gc_fatal("bert: the path '%s/%s' is longer than %zu bytes", dir, name, size - 1);
    return path;
}

/* config.json's integer `key` in [min, max] into *value. */
static gc_status read_size(const char *path, const gc_json *config, const char *key, int64_t min, int64_t max,
                           int64_t *value) {
    const gc_json *field = gc_json_member(config, key);
    if (!field) return gc_json_file_error(path, "no \"%s\"", key);
    if (field->type == GC_JSON_NUMBER)
        return gc_json_file_error(path, "\"%s\" is %g, not an integer in [%lld, %lld]", key, field->number,
                                  (long long)min, (long long)max);
    if (field->type != GC_JSON_INTEGER)
        return gc_json_file_error(path, "\"%s\" is %s, not an integer in [%lld, %lld]", key,
                                  gc_json_type_name(field->type), (long long)min, (long long)max);
    if (field->integer < min || field->integer > max)
        return gc_json_file_error(path, "\"%s\" is %lld, outside [%lld, %lld]", key, (long long)field->integer,
                                  (long long)min, (long long)max);
    *value = field->integer;
    return GC_OK;
}

/* A number `key` in [min, max), or `otherwise` when absent. */
static gc_status read_number(const char *path, const gc_json *config, const char *key, double min, double max,
                             double otherwise, double *value) {
    const gc_json *field = gc_json_member(config, key);
    *value = otherwise;
    if (!field) return GC_OK;
    if (field->type != GC_JSON_NUMBER && field->type != GC_JSON_INTEGER)
        return gc_json_file_error(path, "\"%s\" is %s, not a number in [%g, %g)", key,
                                  gc_json_type_name(field->type), min, max);
    if (!(field->number >= min && field->number < max))
        return gc_json_file_error(path, "\"%s\" is %g, outside [%g, %g)", key, field->number, min, max);
    *value = field->number;
    return GC_OK;
}

/* A string `key` that must be one of `allowed` (NULL-terminated), or `otherwise` when absent;
 * *index is its position. */
static gc_status read_choice(const char *path, const gc_json *config, const char *key, const char *const *allowed,
                             int otherwise, int *index) {
    const gc_json *field = gc_json_member(config, key);
    *index = otherwise;
    if (!field) return GC_OK;
    for (int i = 0; field->type == GC_JSON_STRING && allowed[i]; i++)
        if (strcmp(field->string, allowed[i]) == 0) {
            *index = i;
            return GC_OK;
        }
    char list[160] = "";
    for (int i = 0; allowed[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "", allowed[i]);
    return gc_json_file_error(path, "\"%s\" is %s%.40s%s, not one of the supported %s", key,
                              field->type == GC_JSON_STRING ? "\"" : "",
                              field->type == GC_JSON_STRING ? field->string : gc_json_type_name(field->type),
                              field->type == GC_JSON_STRING ? "\"" : "", list);
}

static gc_status read_bert(const char *path, const gc_json *config, gc_text_encoder_config *c) {
    static const char *const model_types[] = {"bert", NULL};
    static const char *const positions[] = {"absolute", NULL};
    static const char *const activations[] = {"gelu", "gelu_new", "gelu_pytorch_tanh", "relu", NULL};
    static const gc_activation activation_of[] = {GC_ACT_GELU_ERF, GC_ACT_GELU_TANH, GC_ACT_GELU_TANH, GC_ACT_RELU};
    if (config->type != GC_JSON_OBJECT) return gc_json_file_error(path, "not a JSON object");
    if (!gc_json_member(config, "model_type"))
        return gc_json_file_error(path, "no \"model_type\" (not a Hugging Face model configuration)");
    /* each is set by its read before use; the values only keep -O3's flow analysis quiet */
    int model_type = 0, position = 0, activation = 0;
    int64_t heads = 1, layers = 0;
    double hidden_dropout = 0, attention_dropout = 0;
    gc_status status = read_choice(path, config, "model_type", model_types, 0, &model_type);
    if (status == GC_OK) status = read_choice(path, config, "position_embedding_type", positions, 0, &position);
    if (status == GC_OK) status = read_choice(path, config, "hidden_act", activations, 0, &activation);
    if (status == GC_OK) status = read_size(path, config, "vocab_size", 1, INT32_MAX, &c->vocab);
    if (status == GC_OK) status = read_size(path, config, "max_position_embeddings", 1, MAX_SIZE, &c->max_length);
    /* BertModel adds token type 0's vector to every token: a table of none cannot be */
    if (status == GC_OK) status = read_size(path, config, "type_vocab_size", 1, MAX_SIZE, &c->type_vocab);
    if (status == GC_OK) status = read_size(path, config, "hidden_size", 1, MAX_SIZE, &c->dim);
    if (status == GC_OK) status = read_size(path, config, "num_attention_heads", 1, MAX_SIZE, &heads);
    if (status == GC_OK) status = read_size(path, config, "num_hidden_layers", 1, 1000, &layers);
    if (status == GC_OK) status = read_size(path, config, "intermediate_size", 1, MAX_SIZE, &c->hidden);
    if (status == GC_OK) status = read_number(path, config, "layer_norm_eps", 1e-30, 1, 1e-12, &c->layernorm_eps);
    if (status == GC_OK) status = read_number(path, config, "hidden_dropout_prob", 0, 1, 0.1, &hidden_dropout);
    if (status == GC_OK)
        status = read_number(path, config, "attention_probs_dropout_prob", 0, 1, hidden_dropout, &attention_dropout);
    if (status != GC_OK) return status;
    if (c->dim % heads) return gc_json_file_error(path, "hidden_size %lld does not split into %lld heads",
                                                  (long long)c->dim, (long long)heads);
    if (attention_dropout != hidden_dropout)
        return gc_json_file_error(path, "attention_probs_dropout_prob %g differs from hidden_dropout_prob %g "
                                  "(gradcache's encoder has one dropout rate)", attention_dropout, hidden_dropout);
    c->heads = (int)heads;
    c->layers = (int)layers;
    c->activation = activation_of[activation];
    c->dropout = hidden_dropout;
    return GC_OK;
}

/* 1_Pooling/config.json: mean or CLS pooling (sentence-transformers' other modes are refused). */
static gc_status read_pooling(const char *dir, gc_text_encoder_config *c) {
    char path[4096];
    join(path, sizeof path, dir, "1_Pooling/config.json");
    struct stat info;
    if (stat(path, &info) != 0) return GC_OK; /* a plain transformers folder: mean pooling */
    gc_json *pooling;
    gc_status status = gc_json_file_read(path, GC_BERT_MAX_CONFIG, &pooling);
    if (status != GC_OK) return status;
    static const char *const modes[] = {"pooling_mode_mean_tokens", "pooling_mode_cls_token",
                                        "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens"};
    int chosen = -1, count = 0;
    for (int i = 0; i < 4; i++) {
        const gc_json *mode = gc_json_member(pooling, modes[i]);
        if (mode && mode->type == GC_JSON_BOOL && mode->boolean) chosen = i, count++;
    }
    if (count != 1 || chosen > 1)
        status = gc_json_file_error(path, "pooling must be exactly one of pooling_mode_mean_tokens and "
                                    "pooling_mode_cls_token");
    else c->pooling = chosen == 0 ? GC_POOL_MEAN : GC_POOL_CLS;
    gc_json_free(pooling);
    return status;
}

/* modules.json: a sentence_transformers.models.Normalize module normalises the output. */
static gc_status read_modules(const char *dir, gc_text_encoder_config *c) {
    char path[4096];
    join(path, sizeof path, dir, "modules.json");
    struct stat info;
    if (stat(path, &info) != 0) return GC_OK;
    gc_json *modules;
    gc_status status = gc_json_file_read(path, GC_BERT_MAX_CONFIG, &modules);
    if (status != GC_OK) return status;
    if (modules->type != GC_JSON_ARRAY) status = gc_json_file_error(path, "not a JSON array");
    for (const gc_json *module = modules->first; status == GC_OK && module; module = module->next) {
        const gc_json *type = gc_json_member(module, "type");
        if (type && type->type == GC_JSON_STRING && strcmp(type->string, "sentence_transformers.models.Normalize") == 0)
            c->normalize = true;
    }
    gc_json_free(modules);
    return status;
}

gc_status gc_bert_parse_config(const char *text, size_t length, const char *name, gc_text_encoder_config *config) {
    *config = (gc_text_encoder_config){.pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_json *document;
    gc_status status = gc_json_file_parse(name, text, length, &document);
    if (status == GC_OK) status = read_bert(name, document, config);
    gc_json_free(document);
    return status;
}

/* The header of the folder's model.safetensors against the configuration read from
 * `config_path`: its tensor data is not read, and nothing is allocated for the model. */
static gc_status check_weights(const char *dir, const char *config_path, const gc_text_encoder_config *config) {
    char path[4096];
    gc_safetensors *file;
    gc_status status = gc_safetensors_open_header(join(path, sizeof path, dir, "model.safetensors"), &file);
    if (status != GC_OK) return status;
    status = gc_bert_check_weights(file, config, config_path);
    gc_safetensors_close(file);
    return status;
}

gc_status gc_bert_read_config(const char *dir, gc_text_encoder_config *config) {
    char path[4096];
    *config = (gc_text_encoder_config){.pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_json *document;
    gc_status status = gc_json_file_read(join(path, sizeof path, dir, "config.json"), GC_BERT_MAX_CONFIG, &document);
    if (status != GC_OK) return status;
    status = read_bert(path, document, config);
    gc_json_free(document);
    if (status == GC_OK) status = read_pooling(dir, config);
    if (status == GC_OK) status = read_modules(dir, config);
    if (status == GC_OK) status = check_weights(dir, path, config);
    return status;
}
