/* A BERT folder's config.json (the folder's other files are pretrained_folder.c's):
 * BertModel's sizes, activation, eps and dropout, each checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_file.h"
#include "nn/pretrained/config_fields.h"
#include "nn/pretrained/pretrained_internal.h"

gc_status gc_bert_config_read(const char *path, const gc_json *config, gc_text_encoder_config *c) {
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
    gc_status status = gc_config_choice(path, config, "model_type", model_types, 0, &model_type);
    if (status == GC_OK) status = gc_config_choice(path, config, "position_embedding_type", positions, 0, &position);
    if (status == GC_OK) status = gc_config_choice(path, config, "hidden_act", activations, 0, &activation);
    if (status == GC_OK) status = gc_config_size(path, config, "vocab_size", 1, INT32_MAX, &c->vocab);
    if (status == GC_OK) status = gc_config_size(path, config, "max_position_embeddings", 1, GC_CONFIG_MAX_SIZE, &c->max_length);
    /* BertModel adds token type 0's vector to every token: a table of none cannot be */
    if (status == GC_OK) status = gc_config_size(path, config, "type_vocab_size", 1, GC_CONFIG_MAX_SIZE, &c->type_vocab);
    if (status == GC_OK) status = gc_config_size(path, config, "hidden_size", 1, GC_CONFIG_MAX_SIZE, &c->dim);
    if (status == GC_OK) status = gc_config_size(path, config, "num_attention_heads", 1, GC_CONFIG_MAX_SIZE, &heads);
    if (status == GC_OK) status = gc_config_size(path, config, "num_hidden_layers", 1, 1000, &layers);
    if (status == GC_OK) status = gc_config_size(path, config, "intermediate_size", 1, GC_CONFIG_MAX_SIZE, &c->hidden);
    if (status == GC_OK) status = gc_config_number(path, config, "layer_norm_eps", 1e-30, 1, 1e-12, &c->layernorm_eps);
    if (status == GC_OK) status = gc_config_number(path, config, "hidden_dropout_prob", 0, 1, 0.1, &hidden_dropout);
    if (status == GC_OK)
        status = gc_config_number(path, config, "attention_probs_dropout_prob", 0, 1, hidden_dropout, &attention_dropout);
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

gc_status gc_bert_parse_config(const char *text, size_t length, const char *name, gc_text_encoder_config *config) {
    *config = (gc_text_encoder_config){.pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_json *document;
    gc_status status = gc_json_file_parse(name, text, length, &document);
    if (status == GC_OK) status = gc_bert_config_read(name, document, config);
    gc_json_free(document);
    return status;
}

gc_status gc_bert_read_config(const char *dir, gc_text_encoder_config *config) {
    return gc_pretrained_folder_config(dir, &gc_bert_layout, config);
}
