/* The checks and names every family's layout table gets (nn/pretrained/layout.h): a configuration
 * against the header of its weights, before anything is built. */
#include <stdio.h>
#include <string.h>

#include "nn/pretrained/layout.h"

static const char *const size_names[] = {"", "vocab_size", "max_position_embeddings", "type_vocab_size",
                                         "hidden_size", "intermediate_size", "num_attention_heads x head_dim",
                                         "num_key_value_heads x head_dim", "head_dim"};

static int64_t head_dim(const gc_text_encoder_config *c) {
    return c->attention.head_dim ? c->attention.head_dim : c->dim / c->heads;
}

static int64_t size_of(const gc_text_encoder_config *c, gc_layout_size field) {
    switch (field) {
    case GC_SIZE_VOCAB: return c->vocab;
    case GC_SIZE_POSITIONS: return c->max_length;
    case GC_SIZE_TYPES: return c->type_vocab;
    case GC_SIZE_HIDDEN: return c->dim;
    case GC_SIZE_INTERMEDIATE: return c->hidden;
    case GC_SIZE_QUERIES: return c->heads * head_dim(c);
    case GC_SIZE_KEYS: return (c->attention.kv_heads ? c->attention.kv_heads : c->heads) * head_dim(c);
    case GC_SIZE_HEAD_NORM: return c->attention.qk_norm_eps > 0 ? head_dim(c) : 0;
    default: return 0;
    }
}

static bool has_bias(const gc_text_encoder_config *c, gc_layout_bias bias) {
    switch (bias) {
    case GC_BIAS_ALWAYS: return true;
    case GC_BIAS_QKV: return !c->attention.no_qkv_bias;
    case GC_BIAS_OUTPUT: return !c->attention.no_output_bias;
    case GC_BIAS_MLP: return !c->no_mlp_bias;
    default: return false;
    }
}

const gc_layout *gc_layout_of(const gc_text_encoder_config *c) {
    bool rotary = c->attention.rope_theta > 0;
    if (!c->pre_norm && !c->rms_norm && !rotary && !c->gated_mlp && !c->projection) return &gc_bert_layout;
    if (c->pre_norm && c->rms_norm && rotary && c->gated_mlp && !c->projection && !c->type_vocab)
        return &gc_decoder_layout;
    return NULL;
}

const gc_safetensors_entry *gc_weight_files_find(const gc_weight_files *files, const char *name, int *file_index) {
    for (int i = 0; i < files->count; i++) {
        const gc_safetensors_entry *entry = gc_safetensors_find(files->files[i], name);
        if (entry) {
            if (file_index) *file_index = i;
            return entry;
        }
    }
    return NULL;
}

const char *gc_layout_file_prefix(const gc_layout *layout, const gc_weight_files *files) {
    char prefixed[GC_PARAM_NAME_MAX];
    snprintf(prefixed, sizeof prefixed, "%s%s", layout->prefix, layout->probe);
    bool task_model = !gc_weight_files_find(files, layout->probe, NULL) && gc_weight_files_find(files, prefixed, NULL);
    return task_model ? layout->prefix : "";
}

/* The part of table[0..count) whose name (Hugging Face's when `theirs`) starts `name` and is
 * followed by "weight" or, for a part with one, "bias" (*rest then points at that); NULL when
 * there is none. Whether the configuration has that bias is the caller's question. */
static const gc_layout_part *match(const gc_layout_part *table, size_t count, const char *name, bool theirs,
                                   const char **rest) {
    for (size_t i = 0; i < count; i++) {
        const char *prefix = theirs ? table[i].theirs : table[i].ours;
        size_t length = strlen(prefix);
        if (strncmp(name, prefix, length) != 0) continue;
        *rest = name + length;
        if (!strcmp(*rest, "weight") || (table[i].bias != GC_BIAS_NONE && !strcmp(*rest, "bias"))) return &table[i];
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

bool gc_layout_name(const gc_layout *layout, const char *name, char name_out[GC_PARAM_NAME_MAX]) {
    const char *rest;
    const gc_layout_part *found = match(layout->outer, layout->outer_count, name, false, &rest);
    if (found) return snprintf(name_out, GC_PARAM_NAME_MAX, "%s%s", found->theirs, rest) < GC_PARAM_NAME_MAX;
    int layer = layer_of(name, "layers.", INT32_MAX, &rest);
    if (layer < 0 || !(found = match(layout->layer, layout->layer_count, rest, false, &rest))) return false;
    return snprintf(name_out, GC_PARAM_NAME_MAX, "%s%d.%s%s", layout->layer_stem, layer, found->theirs, rest) <
           GC_PARAM_NAME_MAX;
}

bool gc_layout_is_buffer(const gc_layout *layout, const char *name) {
    for (int i = 0; layout->buffers[i]; i++) {
        const char *buffer = layout->buffers[i];
        size_t length = strlen(name), ending = strlen(buffer) - 1;
        if (buffer[0] == '*' ? length >= ending && !strcmp(name + length - ending, buffer + 1) : !strcmp(name, buffer))
            return true;
    }
    return false;
}

bool gc_layout_floating(const char *dtype) {
    return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "F64");
}

void gc_layout_list_name(char *list, size_t size, int count, const char *name) {
    size_t used = strlen(list);
    if (used + strlen(name) + 8 < size) snprintf(list + used, size - used, "%s%s", count ? ", " : "", name);
    else if (!strstr(list, "...")) snprintf(list + used, size - used, ", ...");
}

/* What a check of the files against one configuration carries along. */
typedef struct checker {
    const gc_layout *layout;
    const gc_weight_files *files;
    const gc_text_encoder_config *config;
    const char *config_name; /* in messages */
    const char *prefix;      /* the files': "" or the layout's */
    int missing;             /* weights not in the files, */
    char missing_names[600]; /* listed ", "-separated, cut with "..." */
} checker;

/* The weight `name` (without the files' prefix) of part `p`, its bias when `bias`: there (or
 * listed as missing), of a floating-point dtype, and of the shape the configuration gives. */
static gc_status check_weight(checker *c, const char *name, const gc_layout_part *p, bool bias) {
    char full[GC_PARAM_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", c->prefix, name);
    int file;
    const gc_safetensors_entry *entry = gc_weight_files_find(c->files, full, &file);
    if (!entry) {
        gc_layout_list_name(c->missing_names, sizeof c->missing_names, c->missing++, full);
        return GC_OK;
    }
    const char *file_name = c->files->files[file]->name;
    if (!gc_layout_floating(entry->dtype_name)) {
        gc_set_error(GC_ERR_FORMAT, "%s: weight '%s' is %s, not a floating-point dtype", file_name, full,
                     entry->dtype_name);
        return GC_ERR_FORMAT;
    }
    bool vector = bias || p->cols == GC_SIZE_NONE;
    int64_t shape[2] = {size_of(c->config, p->rows), vector ? 0 : size_of(c->config, p->cols)};
    int ndim = vector ? 1 : 2;
    if (entry->ndim == ndim && entry->shape[0] == shape[0] && (vector || entry->shape[1] == shape[1])) return GC_OK;
    char in_file[96], described[96], fields[160];
    snprintf(fields, sizeof fields, "%s %lld", size_names[p->rows], (long long)shape[0]);
    if (!vector && p->cols != p->rows)
        snprintf(fields + strlen(fields), sizeof fields - strlen(fields), ", %s %lld", size_names[p->cols],
                 (long long)shape[1]);
    gc_set_error(GC_ERR_FORMAT, "%s: weight '%s' is %s, but %s (%s) describes %s", file_name, full,
                 gc_shape_str(entry->ndim, entry->shape, in_file, sizeof in_file), c->config_name, fields,
                 gc_shape_str(ndim, shape, described, sizeof described));
    return GC_ERR_FORMAT;
}

/* check_weight for the weight and the bias of part `p` (a part of size 0 is left out), its
 * names after `before`. */
static gc_status check_part(checker *c, const char *before, const gc_layout_part *p) {
    if (size_of(c->config, p->rows) == 0) return GC_OK;
    char name[GC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s%sweight", before, p->theirs);
    gc_status status = check_weight(c, name, p, false);
    snprintf(name, sizeof name, "%s%sbias", before, p->theirs);
    if (status == GC_OK && has_bias(c->config, p->bias)) status = check_weight(c, name, p, true);
    return status;
}

/* Whether `name` (the file's, without its prefix) is a weight of the configured encoder. */
static bool described(const checker *c, const char *name) {
    const char *rest;
    const gc_layout_part *found = match(c->layout->outer, c->layout->outer_count, name, true, &rest);
    if (!found && layer_of(name, c->layout->layer_stem, c->config->layers, &rest) >= 0)
        found = match(c->layout->layer, c->layout->layer_count, rest, true, &rest);
    return found && size_of(c->config, found->rows) > 0 && (!strcmp(rest, "weight") || has_bias(c->config, found->bias));
}

/* GC_ERR_FORMAT naming the files' weights of the encoder (under its stems) that the
 * configuration leaves out: fewer layers, no token types or no biases where the file has them
 * would run another model than the file's. Buffers (transformers rebuilds them) and what is
 * outside the encoder (a pooler, an LM head) are the caller's to report. */
static gc_status check_unused(const checker *c) {
    char names[600] = "";
    int unused = 0;
    size_t length = strlen(c->prefix);
    for (int f = 0; f < c->files->count; f++)
        for (int i = 0; i < gc_safetensors_count(c->files->files[f]); i++) {
            const char *full = gc_safetensors_name(c->files->files[f], i);
            if (strncmp(full, c->prefix, length) != 0) continue;
            const char *name = full + length;
            bool encoder = false;
            for (int s = 0; c->layout->encoder_stems[s] && !encoder; s++)
                encoder = !strncmp(name, c->layout->encoder_stems[s], strlen(c->layout->encoder_stems[s]));
            if (!encoder || gc_layout_is_buffer(c->layout, name) || described(c, name)) continue;
            gc_layout_list_name(names, sizeof names, unused++, full);
        }
    if (!unused) return GC_OK;
    char fields[96];
    c->layout->describe(c->config, fields, sizeof fields);
    gc_set_error(GC_ERR_FORMAT, "%s: %d weight%s of the encoder %s unused by %s (%s): %s", c->files->files[0]->name,
                 unused, unused == 1 ? "" : "s", unused == 1 ? "is" : "are", c->config_name, fields, names);
    return GC_ERR_FORMAT;
}

gc_status gc_layout_check(const gc_layout *layout, const gc_weight_files *files, const gc_text_encoder_config *config,
                          const char *config_name) {
    if (gc_layout_of(config) != layout)
        gc_fatal("layout_check: the configuration is not laid out by this family's table");
    checker c = {.layout = layout, .files = files, .config = config, .config_name = config_name,
                 .prefix = gc_layout_file_prefix(layout, files)};
    gc_status status = GC_OK;
    for (size_t i = 0; i < layout->outer_count && status == GC_OK; i++) status = check_part(&c, "", &layout->outer[i]);
    for (int layer = 0; layer < config->layers && status == GC_OK; layer++) {
        char before[48];
        snprintf(before, sizeof before, "%s%d.", layout->layer_stem, layer);
        for (size_t i = 0; i < layout->layer_count && status == GC_OK; i++) status = check_part(&c, before, &layout->layer[i]);
    }
    if (status != GC_OK) return status;
    if (c.missing) {
        gc_set_error(GC_ERR_FORMAT, "%s: %d weight%s of the encoder %s describes (num_hidden_layers %d) %s missing: %s",
                     files->files[0]->name, c.missing, c.missing == 1 ? "" : "s", config_name, config->layers,
                     c.missing == 1 ? "is" : "are", c.missing_names);
        return GC_ERR_FORMAT;
    }
    return check_unused(&c);
}
