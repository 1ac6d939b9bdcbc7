/* A BERT encoder's weights under Hugging Face's names: loading with every name, shape and
 * dtype checked (nn/text/bert_layout.c), saving back, and the whole folder (include/gradcache/pretrained.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/text/bert_internal.h"

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

/* The file's entries none of `names` claims, into *unused. */
static gc_status collect_unused(const gc_safetensors *file, char (*names)[GC_PARAM_NAME_MAX], int count,
                                gc_bert_unused *unused) {
    for (int e = 0; e < gc_safetensors_count(file); e++) {
        const char *name = gc_safetensors_name(file, e);
        bool claimed = false;
        for (int i = 0; i < count && !claimed; i++) claimed = !strcmp(names[i], name);
        if (claimed) continue;
        gc_bert_list_name(unused->names, sizeof unused->names, unused->count++, name);
        int ndim;
        int64_t shape[GC_MAX_DIMS];
        const char *dtype = gc_safetensors_dtype_of(file, e, &ndim, shape);
        if (!gc_bert_floating(dtype)) continue; /* an integer buffer such as position_ids: transformers rebuilds it */
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
    char(*names)[GC_PARAM_NAME_MAX] = file_names(&params, gc_bert_file_prefix(file));
    const char **name_list = malloc((size_t)(params.count ? params.count : 1) * sizeof *name_list);
    if (!name_list) gc_fatal("bert: out of host memory for %d names", params.count);
    for (int i = 0; i < params.count; i++) name_list[i] = names[i];
    status = gc_bert_check_weights(file, &encoder->config, "the encoder's configuration");
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
