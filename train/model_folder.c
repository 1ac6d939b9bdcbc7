/* Dual encoders in folders (see gradcache/train.h): pretrained models in the Hugging Face
 * layout (gradcache/pretrained.h) as one tied encoder (a sentence-transformers model encodes
 * queries and passages alike) with its WordPiece tokenizer, a fine-tuned model saved as such a
 * folder again, so that sentence-transformers loads it from the run folder, and where a model
 * argument is told apart: a folder with config.json, or a gradcache model file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/files.h"
#include "gradcache/train.h"
#include "model_file.h"

/* What a model folder tokenizes to when not told (or its positions, if fewer): the length
 * all-MiniLM-L6-v2's tokenizer.json truncates to, and far beyond any WordNet definition. */
#define DEFAULT_EVAL_LENGTH 128

/* The files of a model folder besides the weights, copied into a run folder as they are:
 * what transformers and sentence-transformers read. */
static const char *const folder_files[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
    "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling/config.json",
    NULL,
};

static bool is_file(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

/* True when `path` is a folder holding config.json. */
static bool is_model_folder(const char *path) {
    char *config = gc_path_join(path, "config.json");
    bool found = is_file(config);
    free(config);
    return found;
}

gc_status gc_dual_encoder_from_folder(gc_dual_encoder *model, const char *dir, int64_t max_length, gc_dtype dtype,
                                      gc_device device) {
    *model = (gc_dual_encoder){0};
    gc_text_encoder_config config;
    gc_status status = gc_bert_read_config(dir, &config);
    if (status != GC_OK) return status;
    if (max_length == 0) max_length = config.max_length < DEFAULT_EVAL_LENGTH ? config.max_length : DEFAULT_EVAL_LENGTH;
    if (max_length > config.max_length) {
        gc_set_error(GC_ERR_FORMAT, "%s/config.json: max_position_embeddings is %lld, fewer than the %lld tokens "
                     "asked for", dir, (long long)config.max_length, (long long)max_length);
        return GC_ERR_FORMAT;
    }
    config.dtype = dtype;
    /* one tied encoder; its random initial weights (any seed) are all replaced below */
    status = gc_dual_encoder_init(model, &config, true, device, 0);
    if (status != GC_OK) return status;
    char *weights = gc_path_join(dir, "model.safetensors"), *tokenizer = gc_path_join(dir, "tokenizer.json");
    gc_tokenizer *loaded = NULL;
    status = gc_bert_load_weights(weights, &model->towers[0], &model->unused);
    if (status == GC_OK) status = gc_tokenizer_load(tokenizer, &loaded);
    if (status == GC_OK && gc_tokenizer_vocab_size(loaded) > config.vocab) {
        gc_set_error(GC_ERR_FORMAT, "%s: %lld tokens, more than the vocab_size %lld of config.json", tokenizer,
                     (long long)gc_tokenizer_vocab_size(loaded), (long long)config.vocab);
        status = GC_ERR_FORMAT;
    }
    free(weights);
    free(tokenizer);
    model->tokenizer = loaded ? loaded : model->tokenizer;
    model->max_length = max_length;
    model->pretrained = malloc(strlen(dir) + 1);
    if (!model->pretrained) gc_fatal("model_folder: out of host memory");
    strcpy(model->pretrained, dir);
    if (status != GC_OK) gc_dual_encoder_free(model);
    return status;
}

/* Copies the file `from` to `to` whole (atomically). */
static gc_status copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) {
        gc_set_error(GC_ERR_IO, "%s: cannot open: %s", from, strerror(errno));
        return GC_ERR_IO;
    }
    gc_file_writer out;
    gc_status status = gc_file_begin(&out, to);
    char buffer[1 << 16];
    for (size_t got; status == GC_OK && (got = fread(buffer, 1, sizeof buffer, in)) > 0;)
        if (fwrite(buffer, 1, got, out.file) != got) {
            gc_set_error(GC_ERR_IO, "%s: cannot write: %s", to, strerror(errno));
            status = GC_ERR_IO;
        }
    if (status == GC_OK && ferror(in)) {
        gc_set_error(GC_ERR_IO, "%s: cannot read: %s", from, strerror(errno));
        status = GC_ERR_IO;
    }
    fclose(in);
    if (status == GC_OK) return gc_file_commit(&out);
    gc_file_abort(&out);
    return status;
}

/* True when a and b name the same folder (saving a model over the folder it came from). */
static bool same_folder(const char *a, const char *b) {
    struct stat first, second;
    return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev &&
           first.st_ino == second.st_ino;
}

/* A pretrained model into `dir`: its folder's files copied (unless `dir` is that folder),
 * then the weights under Hugging Face's names to `weights`. */
static gc_status save_pretrained(const gc_dual_encoder *model, const char *dir, const char *weights) {
    gc_status status = GC_OK;
    for (int i = 0; status == GC_OK && folder_files[i] && !same_folder(dir, model->pretrained); i++) {
        char *from = gc_path_join(model->pretrained, folder_files[i]);
        char *to = gc_path_join(dir, folder_files[i]);
        if (is_file(from)) {
            char *slash = strrchr(to, '/');
            *slash = '\0'; /* the file's folder first (1_Pooling) */
            status = gc_make_directories(to);
            *slash = '/';
            if (status == GC_OK) status = copy_file(from, to);
        }
        free(from);
        free(to);
    }
    return status == GC_OK ? gc_bert_save_weights(weights, &model->towers[0], &model->unused) : status;
}

gc_status gc_dual_encoder_save(const gc_dual_encoder *model, const char *dir) {
    gc_status status = gc_make_directories(dir);
    if (status != GC_OK) return status;
    char *weights = gc_path_join(dir, "model.safetensors");
    status = model->pretrained ? save_pretrained(model, dir, weights) : gc_model_file_save(weights, model);
    free(weights);
    return status;
}

gc_status gc_dual_encoder_load(const char *path, int64_t max_length, gc_device device, gc_dual_encoder *model) {
    if (is_model_folder(path))
        return gc_dual_encoder_from_folder(model, path, max_length, GC_F32, device);
    char *file = gc_run_file(path, "model.safetensors");
    gc_status status = gc_model_file_load(file, device, model);
    free(file);
    return status;
}
