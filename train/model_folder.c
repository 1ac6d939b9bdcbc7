/* Dual encoders in folders (see gradcache/train.h): pretrained models in the Hugging Face
 * layout of either family (gradcache/pretrained.h) as one tied encoder (a sentence-transformers
 * model encodes queries and passages alike, a decoder embedder after a prompt for each side)
 * with its own tokenizer, a fine-tuned model saved as such a folder again, so that transformers
 * and sentence-transformers load it from the run folder, and where a model argument is told
 * apart: a folder with config.json, or a gradcache model file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gradcache/files.h"
#include "gradcache/train.h"
#include "model_file.h"

/* What a model folder without sentence_bert_config.json's max_seq_length tokenizes to when not
 * told (or its positions, if fewer): the length all-MiniLM-L6-v2's tokenizer.json truncates
 * to, and far beyond any WordNet definition. */
#define DEFAULT_EVAL_LENGTH 128

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

/* The folder's tokenizer and the prompts of either side, after the weights. */
static gc_status load_text_side(gc_dual_encoder *model, const gc_text_encoder_config *config) {
    gc_tokenizer *loaded;
    gc_status status = gc_pretrained_load_tokenizer(model->pretrained, config, &loaded);
    if (status != GC_OK) return status;
    model->tokenizer = loaded; /* for gc_dual_encoder_init's byte tokenizer, a static one */
    static const char *const names[2] = {"query", "document"}; /* sentence-transformers' */
    for (int side = 0; side < 2 && status == GC_OK; side++)
        status = gc_pretrained_prompt(model->pretrained, names[side], &model->prompts[side]);
    return status;
}

/* Every text gets the tokenizer's special tokens: a length no longer than they are leaves no
 * room for the text (each would encode as its special tokens alone). GC_ERR_CONFIG when the
 * caller asked for the length, GC_ERR_FORMAT when the folder's config set it. */
static gc_status check_room_for_text(const gc_dual_encoder *model, const char *dir, bool asked) {
    int64_t special = gc_tokenizer_special_count(model->tokenizer);
    if (model->max_length > special) return GC_OK;
    if (asked)
        gc_set_error(GC_ERR_CONFIG, "max length %lld leaves no room for text after the %lld special tokens of %s's "
                     "tokenizer", (long long)model->max_length, (long long)special, dir);
    else
        gc_set_error(GC_ERR_FORMAT, "%s/config.json: its %lld positions (max_position_embeddings) leave no room for "
                     "text after the tokenizer's %lld special tokens", dir,
                     (long long)model->max_length, (long long)special);
    return asked ? GC_ERR_CONFIG : GC_ERR_FORMAT;
}

gc_status gc_dual_encoder_from_folder(gc_dual_encoder *model, const char *dir, int64_t max_length, gc_dtype dtype,
                                      gc_device device) {
    *model = (gc_dual_encoder){0};
    gc_text_encoder_config config;
    gc_status status = gc_pretrained_read_config(dir, &config);
    if (status != GC_OK) return status;
    bool asked = max_length != 0;
    if (max_length == 0) { /* sentence-transformers' length (256 for all-MiniLM-L6-v2), within the positions */
        status = gc_pretrained_max_seq_length(dir, &max_length);
        if (status != GC_OK) return status;
        if (max_length == 0) max_length = DEFAULT_EVAL_LENGTH;
        if (max_length > config.max_length) max_length = config.max_length;
    }
    if (max_length > config.max_length) {
        gc_set_error(GC_ERR_FORMAT, "%s/config.json: max_position_embeddings is %lld, fewer than the %lld tokens "
                     "asked for", dir, (long long)config.max_length, (long long)max_length);
        return GC_ERR_FORMAT;
    }
    config.dtype = dtype;
    /* one tied encoder, its weights all loaded below */
    status = gc_dual_encoder_init_unfilled(model, &config, true, device);
    if (status != GC_OK) return status;
    model->max_length = max_length;
    model->pretrained = malloc(strlen(dir) + 1);
    if (!model->pretrained) gc_fatal("model_folder: out of host memory");
    strcpy(model->pretrained, dir);
    status = gc_pretrained_load_weights(dir, &model->towers[0], &model->unused);
    if (status == GC_OK) status = load_text_side(model, &config);
    if (status == GC_OK) status = check_room_for_text(model, dir, asked);
    if (status != GC_OK) gc_dual_encoder_free(model);
    return status;
}

/* True when a and b name the same folder (saving a model over the folder it came from). */
static bool same_folder(const char *a, const char *b) {
    struct stat first, second;
    return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev &&
           first.st_ino == second.st_ino;
}

/* A pretrained model into `dir`: its folder's files copied (unless `dir` is that folder), the
 * weights under Hugging Face's names to `weights`, and then no index of shards left to name
 * other weights than those (transformers and gradcache read model.safetensors first, but a
 * person or another tool might not). */
static gc_status save_pretrained(const gc_dual_encoder *model, const char *dir, const char *weights) {
    gc_status status = same_folder(dir, model->pretrained) ? GC_OK : gc_pretrained_copy_files(model->pretrained, dir);
    if (status == GC_OK) status = gc_pretrained_save_weights(weights, &model->towers[0], &model->unused);
    char *index = gc_path_join(dir, "model.safetensors.index.json");
    if (status == GC_OK && unlink(index) != 0 && errno != ENOENT) {
        gc_set_error(GC_ERR_IO, "%s: cannot remove the index of shards that model.safetensors replaces: %s", index,
                     strerror(errno));
        status = GC_ERR_IO;
    }
    free(index);
    return status;
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
    if (gc_is_lora_run(path)) return gc_dual_encoder_from_lora_run(model, path, max_length, GC_F32, device);
    char *file = gc_run_file(path, "model.safetensors");
    gc_status status = gc_model_file_load(file, device, model);
    free(file);
    return status;
}
