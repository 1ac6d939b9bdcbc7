/* A model folder written back whole (include/gradcache/pretrained.h): the source folder's
 * small files (configuration, tokenizer, sentence-transformers' modules) copied as they are,
 * and the weights under Hugging Face's names, built in a temporary folder and renamed into
 * place (gradcache/files.h), so that a folder is complete or absent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/files.h"
#include "nn/pretrained/pretrained_internal.h"

/* What a folder holds besides its weights, copied when the source has it. Not the shards'
 * index: the weights are written as one model.safetensors. */
static const char *const copied[] = {
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt", "vocab.json", "merges.txt", "modules.json", "sentence_bert_config.json",
    "config_sentence_transformers.json", "1_Pooling/config.json", NULL,
};

static char *joined(const char *dir, const char *name) {
    size_t size = strlen(dir) + strlen(name) + 2;
    char *path = malloc(size);
    if (!path) gc_fatal("pretrained_save: out of host memory");
    snprintf(path, size, "%s/%s", dir, name);
    return path;
}

/* Copies the file `name` of `from`, if there is one, into `to` (a sub-folder made first),
 * bounded in size as a tokenizer.json is. */
static gc_status copy_file(const char *from, const char *to, const char *name) {
    char *source = joined(from, name), *target = joined(to, name), *text = NULL;
    size_t size = 0;
    struct stat info;
    gc_status status = stat(source, &info) == 0 ? gc_file_read_bounded(source, GC_TOKENIZER_MAX_FILE, &text, &size)
                                                : GC_OK;
    const char *slash = strchr(name, '/');
    if (status == GC_OK && text && slash) { /* 1_Pooling/ */
        char folder[4096];
        snprintf(folder, sizeof folder, "%s/%.*s", to, (int)(slash - name), name);
        if (mkdir(folder, 0777) != 0 && errno != EEXIST) {
            gc_set_error(GC_ERR_IO, "%s: cannot make the folder: %s", folder, strerror(errno));
            status = GC_ERR_IO;
        }
    }
    gc_file_writer writer;
    if (status == GC_OK && text && (status = gc_file_begin(&writer, target)) == GC_OK) {
        if (fwrite(text, 1, size, writer.file) == size) {
            status = gc_file_commit(&writer);
        } else {
            gc_file_abort(&writer);
            gc_set_error(GC_ERR_IO, "%s: cannot write", target);
            status = GC_ERR_IO;
        }
    }
    free(text);
    free(source);
    free(target);
    return status;
}

gc_status gc_pretrained_copy_files(const char *source, const char *dir) {
    gc_status status = GC_OK;
    for (int i = 0; copied[i] && status == GC_OK; i++) status = copy_file(source, dir, copied[i]);
    return status;
}

gc_status gc_pretrained_save(const char *dir, const gc_text_encoder *encoder, const gc_bert_unused *unused,
                             const char *source) {
    char *temporary;
    gc_status status = gc_folder_begin(dir, &temporary);
    if (status != GC_OK) return status;
    if (source) status = gc_pretrained_copy_files(source, temporary);
    char *weights = joined(temporary, "model.safetensors");
    if (status == GC_OK) status = gc_pretrained_save_weights(weights, encoder, unused);
    if (status == GC_OK) status = gc_folder_commit(temporary, dir);
    if (status != GC_OK) gc_folder_remove(temporary);
    free(weights);
    free(temporary);
    return status;
}
