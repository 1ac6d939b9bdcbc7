/* A BERT encoder's weights under Hugging Face's names: the name map, loading with every
 * name, shape and dtype checked, and saving back (include/gradcache/pretrained.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/pretrained.h"
#include "nn/safetensors_internal.h"

/* gradcache's names -> Hugging Face's, as prefixes of "weight" or "bias": outside the layers,
 * and inside layer N ("layers.N." -> "encoder.layer.N."). */
static const char *const embedding_names[][2] = {
    {"embeddings.tokens.", "embeddings.word_embeddings."},
    {"embeddings.positions.", "embeddings.position_embeddings."},
    {"embeddings.token_types.", "embeddings.token_type_embeddings."},
    {"embeddings.norm.", "embeddings.LayerNorm."},
};
static const char *const layer_names[][2] = {
    {"attention.query.", "attention.self.query."},
    {"attention.key.", "attention.self.key."},
    {"attention.value.", "attention.self.value."},
    {"attention.output.", "attention.output.dense."},
    {"attention_norm.", "attention.output.LayerNorm."},
    {"mlp.in.", "intermediate.dense."},
    {"mlp.out.", "output.dense."},
    {"mlp_norm.", "output.LayerNorm."},
};

/* Rewrites `name` by the first prefix of table[0..count) it starts with, when the rest is
 * "weight" or "bias": out = before + table's name + the rest. */
static bool rename_with(const char *const (*table)[2], size_t count, const char *before, const char *name,
                        char out[GC_PARAM_NAME_MAX]) {
    for (size_t i = 0; i < count; i++) {
        size_t length = strlen(table[i][0]);
        const char *rest = name + length;
        if (strncmp(name, table[i][0], length) == 0 && (!strcmp(rest, "weight") || !strcmp(rest, "bias")))
            return snprintf(out, GC_PARAM_NAME_MAX, "%s%s%s", before, table[i][1], rest) < GC_PARAM_NAME_MAX;
    }
    return false;
}

bool gc_bert_weight_name(const char *name, char name_out[GC_PARAM_NAME_MAX]) {
    if (rename_with(embedding_names, sizeof embedding_names / sizeof *embedding_names, "", name, name_out)) return true;
    int layer, used = 0;
    if (sscanf(name, "layers.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0) return false;
    char before[32];
    snprintf(before, sizeof before, "encoder.layer.%d.", layer);
    return rename_with(layer_names, sizeof layer_names / sizeof *layer_names, before, name + used, name_out);
}

void gc_bert_unused_free(gc_bert_unused *unused) {
    gc_param_list_free(&unused->kept);
    *unused = (gc_bert_unused){0};
}

/* The Hugging Face names of the encoder's parameters (with the file's prefix), in the order of
 * gc_text_encoder_params. */
static char (*file_names(const gc_param_list *params, const char *prefix))[GC_PARAM_NAME_MAX] {
    char(*names)[GC_PARAM_NAME_MAX] = calloc((size_t)(params->count ? params->count : 1), sizeof *names);
    if (!names) gc_fatal("bert: out of host memory for %d names", params->count);
    for (int i = 0; i < params->count; i++) {
        char name[GC_PARAM_NAME_MAX];
        if (!gc_bert_weight_name(params->items[i].name, name))
            gc_fatal("bert: parameter '%s' has no Hugging Face name (not a BERT-shaped encoder)", params->items[i].name);
        if ((size_t)snprintf(names[i], GC_PARAM_NAME_MAX, "%s%s", prefix, name) >= GC_PARAM_NAME_MAX)
            gc_fatal("bert: name '%s%s' is too long", prefix, name);
    }
    return names;
}

static bool floating(const char *dtype) {
    return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "F64");
}

/* GC_ERR_FORMAT listing every weight of `names` the file lacks, or naming the first that is
 * not floating point (shapes are checked as they load). */
static gc_status check_present(const char *path, const gc_safetensors *file, char (*names)[GC_PARAM_NAME_MAX],
                               int count) {
    char list[600] = "";
    int missing = 0;
    for (int i = 0; i < count; i++) {
        const gc_safetensors_entry *entry = gc_safetensors_find(file, names[i]);
        if (entry && !floating(entry->dtype_name)) {
            gc_set_error(GC_ERR_FORMAT, "%s: weight '%s' is %s, not a floating-point dtype", path, names[i],
                         entry->dtype_name);
            return GC_ERR_FORMAT;
        }
        if (entry) continue;
        size_t used = strlen(list);
        if (used < sizeof list - 100) snprintf(list + used, sizeof list - used, "%s%s", missing ? ", " : "", names[i]);
        else if (!strstr(list, "...")) strcat(list, ", ...");
        missing++;
    }
    if (!missing) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: %d weight%s missing: %s", path, missing, missing == 1 ? " is" : "s are", list);
    return GC_ERR_FORMAT;
}

/* The file's entries none of `names` claims, into *unused. */
static gc_status collect_unused(const gc_safetensors *file, char (*names)[GC_PARAM_NAME_MAX], int count,
                                gc_bert_unused *unused) {
    for (int e = 0; e < gc_safetensors_count(file); e++) {
        const char *name = gc_safetensors_name(file, e);
        bool claimed = false;
        for (int i = 0; i < count && !claimed; i++) claimed = !strcmp(names[i], name);
        if (claimed) continue;
        size_t used = strlen(unused->names);
        if (used + strlen(name) + 8 < sizeof unused->names)
            snprintf(unused->names + used, sizeof unused->names - used, "%s%s", unused->count ? ", " : "", name);
        else if (!strstr(unused->names, "..."))
            snprintf(unused->names + used, sizeof unused->names - used, ", ...");
        unused->count++;
        int ndim;
        int64_t shape[GC_MAX_DIMS];
        const char *dtype = gc_safetensors_dtype_of(file, e, &ndim, shape);
        if (!floating(dtype)) continue; /* an integer buffer such as position_ids: transformers rebuilds it */
        gc_tensor *tensor = gc_safetensors_get(file, name, gc_cpu());
        if (!tensor) return gc_last_status();
        gc_param_list_add(&unused->kept, "", name, tensor, false);
        gc_tensor_release(tensor);
    }
    return GC_OK;
}

gc_status gc_bert_load_weights(const char *path, const gc_text_encoder *encoder, gc_bert_unused *unused) {
    if (unused) *unused = (gc_bert_unused){0};
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status != GC_OK) return status;
    gc_param_list params = {0};
    gc_text_encoder_params(encoder, "", &params);
    /* BertModel writes bare names; the task models (BertForMaskedLM, ...) put theirs under "bert." */
    bool prefixed = !gc_safetensors_find(file, "embeddings.word_embeddings.weight") &&
                    gc_safetensors_find(file, "bert.embeddings.word_embeddings.weight");
    char(*names)[GC_PARAM_NAME_MAX] = file_names(&params, prefixed ? "bert." : "");
    const char **name_list = malloc((size_t)(params.count ? params.count : 1) * sizeof *name_list);
    if (!name_list) gc_fatal("bert: out of host memory for %d names", params.count);
    for (int i = 0; i < params.count; i++) name_list[i] = names[i];
    status = check_present(path, file, names, params.count);
    if (status == GC_OK) status = gc_safetensors_load_named(file, &params, name_list);
    if (status == GC_OK && unused) status = collect_unused(file, names, params.count, unused);
    if (status != GC_OK && unused) gc_bert_unused_free(unused);
    free(name_list);
    free(names);
    gc_param_list_free(&params);
    gc_safetensors_close(file);
    return status;
}

gc_status gc_bert_save_weights(const char *path, const gc_text_encoder *encoder, const gc_bert_unused *unused) {
    gc_param_list params = {0}, named = {0};
    gc_text_encoder_params(encoder, "", &params);
    char(*names)[GC_PARAM_NAME_MAX] = file_names(&params, "");
    for (int i = 0; i < params.count; i++) gc_param_list_add(&named, "", names[i], params.items[i].tensor, false);
    for (int i = 0; unused && i < unused->kept.count; i++)
        gc_param_list_add(&named, "", unused->kept.items[i].name, unused->kept.items[i].tensor, false);
    /* transformers reads a safetensors file only when its metadata says it holds PyTorch tensors */
    static const char *const metadata[] = {"format", "pt", NULL};
    gc_status status = gc_safetensors_save(path, &named, metadata);
    free(names);
    gc_param_list_free(&named);
    gc_param_list_free(&params);
    return status;
}

gc_status gc_bert_load(const char *dir, gc_device device, gc_text_encoder *encoder, gc_tokenizer **tokenizer,
                       gc_bert_unused *unused) {
    *encoder = (gc_text_encoder){0};
    *tokenizer = NULL;
    gc_text_encoder_config config;
    gc_status status = gc_bert_read_config(dir, &config);
    if (status != GC_OK) return status;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", dir) >= sizeof path) {
        gc_set_error(GC_ERR_IO, "%s: the folder's path is too long", dir);
        return GC_ERR_IO;
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    status = gc_tokenizer_load(path, tokenizer);
    if (status != GC_OK) return status;
    if (gc_tokenizer_vocab_size(*tokenizer) > config.vocab) {
        gc_set_error(GC_ERR_FORMAT, "%s: %lld tokens, more than the vocab_size %lld of config.json", path,
                     (long long)gc_tokenizer_vocab_size(*tokenizer), (long long)config.vocab);
        status = GC_ERR_FORMAT;
    }
    gc_generator init = {0, 0}; /* the file's weights replace these */
    if (status == GC_OK) status = gc_text_encoder_init(encoder, &config, device, &init);
    if (status == GC_OK) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        status = gc_bert_load_weights(path, encoder, unused);
        if (status != GC_OK) gc_text_encoder_free(encoder);
    }
    if (status != GC_OK) {
        gc_tokenizer_free(*tokenizer);
        *tokenizer = NULL;
    }
    return status;
}
