/* How a BERT encoder is laid out in Hugging Face's files: the names of its weights, their
 * shapes as config.json's sizes give them, and the check of a file's header against a
 * configuration, made before an encoder is built from it (include/gradcache/pretrained.h). */
#include <stdio.h>
#include <string.h>

#include "nn/text/bert_internal.h"

/* config.json's sizes, of which a weight's dimensions are made. */
typedef enum size_field { NO_SIZE, VOCAB, POSITIONS, TYPES, HIDDEN, INTERMEDIATE } size_field;
static const char *const field_names[] = {"", "vocab_size", "max_position_embeddings", "type_vocab_size",
                                          "hidden_size", "intermediate_size"};

static int64_t size_of(const gc_text_encoder_config *config, size_field field) {
    switch (field) {
    case VOCAB: return config->vocab;
    case POSITIONS: return config->max_length;
    case TYPES: return config->type_vocab;
    case HIDDEN: return config->dim;
    case INTERMEDIATE: return config->hidden;
    default: return 0;
    }
}

/* A part of the encoder: gradcache's name -> Hugging Face's, as prefixes of "weight", of
 * shape [rows] (cols NO_SIZE) or [rows, cols] (a Linear's [out, in]), and of "bias" [rows]
 * when the part has one. */
typedef struct part {
    const char *ours, *theirs;
    size_field rows, cols;
    bool bias;
} part;

static const part embedding_parts[] = {
    {"embeddings.tokens.", "embeddings.word_embeddings.", VOCAB, HIDDEN, false},
    {"embeddings.positions.", "embeddings.position_embeddings.", POSITIONS, HIDDEN, false},
    {"embeddings.token_types.", "embeddings.token_type_embeddings.", TYPES, HIDDEN, false},
    {"embeddings.norm.", "embeddings.LayerNorm.", HIDDEN, NO_SIZE, true},
};
/* inside layer N: "layers.N." -> "encoder.layer.N." */
static const part layer_parts[] = {
    {"attention.query.", "attention.self.query.", HIDDEN, HIDDEN, true},
    {"attention.key.", "attention.self.key.", HIDDEN, HIDDEN, true},
    {"attention.value.", "attention.self.value.", HIDDEN, HIDDEN, true},
    {"attention.output.", "attention.output.dense.", HIDDEN, HIDDEN, true},
    {"attention_norm.", "attention.output.LayerNorm.", HIDDEN, NO_SIZE, true},
    {"mlp.in.", "intermediate.dense.", INTERMEDIATE, HIDDEN, true},
    {"mlp.out.", "output.dense.", HIDDEN, INTERMEDIATE, true},
    {"mlp_norm.", "output.LayerNorm.", HIDDEN, NO_SIZE, true},
};
#define EMBEDDING_PARTS (sizeof embedding_parts / sizeof *embedding_parts)
#define LAYER_PARTS (sizeof layer_parts / sizeof *layer_parts)

/* The part of table[0..count) whose name (Hugging Face's when `theirs`) starts `name` and is
 * followed by "weight" or, for a part with one, "bias" (*rest then points at that); NULL when
 * there is none. */
static const part *match(const part *table, size_t count, const char *name, bool theirs, const char **rest) {
    for (size_t i = 0; i < count; i++) {
        const char *prefix = theirs ? table[i].theirs : table[i].ours;
        size_t length = strlen(prefix);
        if (strncmp(name, prefix, length) != 0) continue;
        *rest = name + length;
        if (!strcmp(*rest, "weight") || (table[i].bias && !strcmp(*rest, "bias"))) return &table[i];
    }
    return NULL;
}

/* N of a name that starts with `stem` "N." (N a decimal below `layers`, written as printf
 * writes it: the names come from files, so "05" or "+5" is not layer 5), with *rest after the
 * dot; -1 otherwise. */
static int layer_of(const char *name, const char *stem, int layers, const char **rest) {
    size_t length = strlen(stem);
    if (strncmp(name, stem, length) != 0) return -1;
    const char *digit = name + length;
    if (*digit < '0' || *digit > '9' || (digit[0] == '0' && digit[1] != '.')) return -1;
    int64_t layer = 0;
    for (; *digit >= '0' && *digit <= '9'; digit++)
        if ((layer = layer * 10 + (*digit - '0')) >= layers) return -1;
    if (*digit != '.') return -1;
    *rest = digit + 1;
    return (int)layer;
}

bool gc_bert_weight_name(const char *name, char name_out[GC_PARAM_NAME_MAX]) {
    const char *rest;
    const part *found = match(embedding_parts, EMBEDDING_PARTS, name, false, &rest);
    if (found) return snprintf(name_out, GC_PARAM_NAME_MAX, "%s%s", found->theirs, rest) < GC_PARAM_NAME_MAX;
    int layer = layer_of(name, "layers.", INT32_MAX, &rest);
    if (layer < 0 || !(found = match(layer_parts, LAYER_PARTS, rest, false, &rest))) return false;
    return snprintf(name_out, GC_PARAM_NAME_MAX, "encoder.layer.%d.%s%s", layer, found->theirs, rest) <
           GC_PARAM_NAME_MAX;
}

const char *gc_bert_file_prefix(const gc_safetensors *file) {
    /* BertModel writes bare names; the task models (BertForMaskedLM, ...) put theirs under "bert." */
    bool prefixed = !gc_safetensors_find(file, "embeddings.word_embeddings.weight") &&
                    gc_safetensors_find(file, "bert.embeddings.word_embeddings.weight");
    return prefixed ? "bert." : "";
}

bool gc_bert_floating(const char *dtype) {
    return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "F64");
}

void gc_bert_list_name(char *list, size_t size, int count, const char *name) {
    size_t used = strlen(list);
    if (used + strlen(name) + 8 < size) snprintf(list + used, size - used, "%s%s", count ? ", " : "", name);
    else if (!strstr(list, "...")) snprintf(list + used, size - used, ", ...");
}

/* What a check of one file against one configuration carries along. */
typedef struct checker {
    const gc_safetensors *file;
    const gc_text_encoder_config *config;
    const char *config_name; /* in messages */
    const char *prefix;      /* the file's: "" or "bert." */
    int missing;             /* weights not in the file, */
    char missing_names[600]; /* listed ", "-separated, cut with "..." */
} checker;

/* The weight `name` (without the file's prefix) of part `p`, its bias when `bias`: there (or
 * listed as missing), of a floating-point dtype, and of the shape the configuration gives. */
static gc_status check_weight(checker *c, const char *name, const part *p, bool bias) {
    char full[GC_PARAM_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", c->prefix, name);
    const gc_safetensors_entry *entry = gc_safetensors_find(c->file, full);
    if (!entry) {
        gc_bert_list_name(c->missing_names, sizeof c->missing_names, c->missing++, full);
        return GC_OK;
    }
    if (!gc_bert_floating(entry->dtype_name)) {
        gc_set_error(GC_ERR_FORMAT, "%s: weight '%s' is %s, not a floating-point dtype", c->file->name, full,
                     entry->dtype_name);
        return GC_ERR_FORMAT;
    }
    bool vector = bias || p->cols == NO_SIZE;
    int64_t shape[2] = {size_of(c->config, p->rows), vector ? 0 : size_of(c->config, p->cols)};
    int ndim = vector ? 1 : 2;
    if (entry->ndim == ndim && entry->shape[0] == shape[0] && (vector || entry->shape[1] == shape[1])) return GC_OK;
    char in_file[96], described[96], fields[160];
    snprintf(fields, sizeof fields, "%s %lld", field_names[p->rows], (long long)shape[0]);
    if (!vector && p->cols != p->rows)
        snprintf(fields + strlen(fields), sizeof fields - strlen(fields), ", %s %lld", field_names[p->cols],
                 (long long)shape[1]);
    gc_set_error(GC_ERR_FORMAT, "%s: weight '%s' is %s, but %s (%s) describes %s", c->file->name, full,
                 gc_shape_str(entry->ndim, entry->shape, in_file, sizeof in_file), c->config_name, fields,
                 gc_shape_str(ndim, shape, described, sizeof described));
    return GC_ERR_FORMAT;
}

/* check_weight for the weight and the bias of part `p`, its names after `before`. */
static gc_status check_part(checker *c, const char *before, const part *p) {
    char name[GC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s%sweight", before, p->theirs);
    gc_status status = check_weight(c, name, p, false);
    snprintf(name, sizeof name, "%s%sbias", before, p->theirs);
    if (status == GC_OK && p->bias) status = check_weight(c, name, p, true);
    return status;
}

/* Whether `name` (the file's, without its prefix) is a weight of the configured encoder. */
static bool described(const gc_text_encoder_config *config, const char *name) {
    const char *rest;
    const part *found = match(embedding_parts, EMBEDDING_PARTS, name, true, &rest);
    if (found) return size_of(config, found->rows) > 0;
    return layer_of(name, "encoder.layer.", config->layers, &rest) >= 0 &&
           match(layer_parts, LAYER_PARTS, rest, true, &rest) != NULL;
}

/* GC_ERR_FORMAT naming the file's weights of the encoder ("embeddings.*", "encoder.*") that
 * the configuration leaves out: fewer layers, or no token types, than the file was trained
 * with would run another model than the file's. position_ids is a buffer (transformers
 * rebuilds it), and the pooler is no part of the encoder: they are the caller's to report. */
static gc_status check_unused(const checker *c) {
    char names[600] = "";
    int unused = 0;
    size_t length = strlen(c->prefix);
    for (int i = 0; i < gc_safetensors_count(c->file); i++) {
        const char *full = gc_safetensors_name(c->file, i);
        if (strncmp(full, c->prefix, length) != 0) continue;
        const char *name = full + length;
        bool encoder = !strncmp(name, "embeddings.", 11) || !strncmp(name, "encoder.", 8);
        if (!encoder || !strcmp(name, "embeddings.position_ids") || described(c->config, name)) continue;
        gc_bert_list_name(names, sizeof names, unused++, full);
    }
    if (!unused) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: %d weight%s of the encoder %s unused by %s (num_hidden_layers %d, "
                 "type_vocab_size %lld): %s", c->file->name, unused, unused == 1 ? "" : "s", unused == 1 ? "is" : "are",
                 c->config_name, c->config->layers, (long long)c->config->type_vocab, names);
    return GC_ERR_FORMAT;
}

gc_status gc_bert_check_weights(const gc_safetensors *file, const gc_text_encoder_config *config,
                                const char *config_name) {
    if (config->pre_norm || config->projection)
        gc_fatal("bert_check_weights: a pre-norm encoder or one with a projection has no BERT layout");
    checker c = {.file = file, .config = config, .config_name = config_name, .prefix = gc_bert_file_prefix(file)};
    gc_status status = GC_OK;
    for (size_t i = 0; i < EMBEDDING_PARTS && status == GC_OK; i++)
        if (size_of(config, embedding_parts[i].rows) > 0) /* type_vocab 0: an encoder without token types */
            status = check_part(&c, "", &embedding_parts[i]);
    for (int layer = 0; layer < config->layers && status == GC_OK; layer++) {
        char before[32];
        snprintf(before, sizeof before, "encoder.layer.%d.", layer);
        for (size_t i = 0; i < LAYER_PARTS && status == GC_OK; i++) status = check_part(&c, before, &layer_parts[i]);
    }
    if (status != GC_OK) return status;
    if (c.missing) {
        gc_set_error(GC_ERR_FORMAT, "%s: %d weight%s of the encoder %s describes (num_hidden_layers %d) %s missing: %s",
                     file->name, c.missing, c.missing == 1 ? "" : "s", config_name, config->layers,
                     c.missing == 1 ? "is" : "are", c.missing_names);
        return GC_ERR_FORMAT;
    }
    return check_unused(&c);
}
