/* An encoder's weights under Hugging Face's names, any family (nn/pretrained/layout.h): loading
 * with every name, shape and dtype checked first, from one file or shard by shard (one
 * shard's data in host memory at a time), and saving back (include/gradcache/pretrained.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/files.h"
#include "nn/pretrained/layout.h"

void gc_bert_unused_free(gc_bert_unused *unused) {
    gc_param_list_free(&unused->kept);
    *unused = (gc_bert_unused){0};
}

/* The layout of an encoder's configuration; an encoder of none has no Hugging Face names. */
static const gc_layout *layout_of(const gc_text_encoder *encoder) {
    const gc_layout *layout = gc_layout_of(&encoder->config);
    if (!layout) gc_fatal("pretrained: the encoder is neither BERT-shaped nor a decoder-family model (no Hugging Face layout)");
    return layout;
}

/* The Hugging Face names of the encoder's parameters (with the files' prefix), in the order of
 * gc_text_encoder_params. */
static char (*file_names(const gc_layout *layout, const gc_param_list *params, const char *prefix))[GC_PARAM_NAME_MAX] {
    char(*names)[GC_PARAM_NAME_MAX] = calloc((size_t)(params->count ? params->count : 1), sizeof *names);
    if (!names) gc_fatal("pretrained: out of host memory for %d names", params->count);
    for (int i = 0; i < params->count; i++) {
        char name[GC_PARAM_NAME_MAX];
        if (!gc_layout_name(layout, params->items[i].name, name))
            gc_fatal("pretrained: parameter '%s' has no Hugging Face name", params->items[i].name);
        if ((size_t)snprintf(names[i], GC_PARAM_NAME_MAX, "%s%s", prefix, name) >= GC_PARAM_NAME_MAX)
            gc_fatal("pretrained: name '%s%s' is too long", prefix, name);
    }
    return names;
}

/* The entries of `file` (opened whole) none of `names` claims, into *unused: floating ones
 * kept (a pooler, an LM head), others only named (an integer buffer, which transformers
 * rebuilds). */
static gc_status collect_unused(const gc_safetensors *file, char (*names)[GC_PARAM_NAME_MAX], int count,
                                gc_bert_unused *unused) {
    for (int e = 0; e < gc_safetensors_count(file); e++) {
        const char *name = gc_safetensors_name(file, e);
        bool claimed = false;
        for (int i = 0; i < count && !claimed; i++) claimed = !strcmp(names[i], name);
        if (claimed) continue;
        gc_layout_list_name(unused->names, sizeof unused->names, unused->count++, name);
        int ndim;
        int64_t shape[GC_MAX_DIMS];
        if (!gc_layout_floating(gc_safetensors_dtype_of(file, e, &ndim, shape))) continue;
        gc_tensor *tensor = gc_safetensors_get(file, name, gc_cpu());
        if (!tensor) return gc_last_status();
        gc_param_list_add(&unused->kept, "", name, tensor, false);
        gc_tensor_release(tensor);
    }
    return GC_OK;
}

/* The parameters whose entries are in file `f` from it (opened whole here when the files are
 * headers), and what else it holds into *unused. */
static gc_status load_file(const gc_weight_files *files, int f, const gc_param_list *params,
                           char (*names)[GC_PARAM_NAME_MAX], gc_bert_unused *unused) {
    gc_safetensors *whole = files->files[f];
    gc_status status = files->paths ? gc_safetensors_open(files->paths[f], &whole) : GC_OK;
    gc_param_list subset = {0};
    const char **subset_names = malloc((size_t)(params->count ? params->count : 1) * sizeof *subset_names);
    if (!subset_names) gc_fatal("pretrained: out of host memory for %d names", params->count);
    for (int i = 0; status == GC_OK && i < params->count; i++)
        if (gc_safetensors_find(whole, names[i])) {
            subset_names[subset.count] = names[i];
            gc_param_list_add(&subset, "", params->items[i].name, params->items[i].tensor, false);
        }
    if (status == GC_OK) status = gc_safetensors_load_named(whole, &subset, subset_names);
    if (status == GC_OK && unused) status = collect_unused(whole, names, params->count, unused);
    gc_param_list_free(&subset);
    free(subset_names);
    if (files->paths) gc_safetensors_close(whole);
    return status;
}

/* Checks `files` against the encoder's configuration, then loads them file by file. */
static gc_status load_files(const gc_weight_files *files, const gc_text_encoder *encoder, gc_bert_unused *unused) {
    if (unused) *unused = (gc_bert_unused){0};
    const gc_layout *layout = layout_of(encoder);
    gc_status status = gc_layout_check(layout, files, &encoder->config, "the encoder's configuration");
    if (status != GC_OK) return status;
    gc_param_list params = {0};
    gc_text_encoder_params(encoder, "", &params);
    char(*names)[GC_PARAM_NAME_MAX] = file_names(layout, &params, gc_layout_file_prefix(layout, files));
    for (int f = 0; status == GC_OK && f < files->count; f++) status = load_file(files, f, &params, names, unused);
    if (status != GC_OK && unused) gc_bert_unused_free(unused);
    free(names);
    gc_param_list_free(&params);
    return status;
}

gc_status gc_bert_load_weights(const char *path, const gc_text_encoder *encoder, gc_bert_unused *unused) {
    if (unused) *unused = (gc_bert_unused){0};
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status != GC_OK) return status;
    status = load_files(&(gc_weight_files){.files = &file, .count = 1}, encoder, unused);
    gc_safetensors_close(file);
    return status;
}

gc_status gc_pretrained_load_weights(const char *dir, const gc_text_encoder *encoder, gc_bert_unused *unused) {
    if (unused) *unused = (gc_bert_unused){0};
    gc_weight_files files;
    gc_status status = gc_weight_files_open(dir, &files);
    if (status == GC_OK) status = load_files(&files, encoder, unused);
    gc_weight_files_close(&files);
    return status;
}

gc_status gc_pretrained_save_weights(const char *path, const gc_text_encoder *encoder, const gc_bert_unused *unused) {
    gc_param_list params = {0}, named = {0};
    gc_text_encoder_params(encoder, "", &params);
    char(*names)[GC_PARAM_NAME_MAX] = file_names(layout_of(encoder), &params, "");
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

gc_status gc_bert_save_weights(const char *path, const gc_text_encoder *encoder, const gc_bert_unused *unused) {
    return gc_pretrained_save_weights(path, encoder, unused);
}
