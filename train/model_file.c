/* The model file (see model_file.h). */
#include <string.h>

#include "model_file.h"
#include "numbers.h"

/* The architecture every model of the trainer shares (post-norm, gelu, mean pooling); a later
 * change of it gets a new name, so that old files are refused instead of misread. The
 * parameters' dtype is "model.dtype" (f32, f16 or bf16; absent in files written before
 * 16-bit training, which are f32). */
#define MODEL_FORMAT "gradcache-dual-encoder-1"
/* Far beyond the presets; bounds what a foreign file can make us allocate. */
#define MODEL_MAX_SIZE 65536

void gc_model_describe(const gc_dual_encoder *model, gc_metadata *metadata) {
    const gc_text_encoder_config *c = &model->towers[0].config;
    gc_metadata_set(metadata, "format", "%s", MODEL_FORMAT);
    gc_metadata_set(metadata, "model.vocab", "%lld", (long long)c->vocab);
    gc_metadata_set(metadata, "model.max_length", "%lld", (long long)c->max_length);
    gc_metadata_set(metadata, "model.dim", "%lld", (long long)c->dim);
    gc_metadata_set(metadata, "model.heads", "%d", c->heads);
    gc_metadata_set(metadata, "model.layers", "%d", c->layers);
    gc_metadata_set(metadata, "model.hidden", "%lld", (long long)c->hidden);
    gc_metadata_set(metadata, "model.projection", "%lld", (long long)c->projection);
    char number[32];
    gc_metadata_set(metadata, "model.dropout", "%s", gc_format_exact(c->dropout, number, sizeof number));
    gc_metadata_set(metadata, "model.tied", "%d", model->tied ? 1 : 0);
    gc_metadata_set(metadata, "model.dtype", "%s", gc_dtype_name(c->dtype));
}

/* The parameters' dtype: "model.dtype" f32, f16 or bf16 (absent: f32). */
static gc_status read_dtype(const gc_safetensors *file, const char *path, gc_dtype *dtype) {
    const char *name = gc_safetensors_metadata(file, "model.dtype");
    static const gc_dtype choices[] = {GC_F32, GC_F16, GC_BF16};
    *dtype = GC_F32;
    if (!name) return GC_OK;
    for (size_t i = 0; i < sizeof choices / sizeof *choices; i++)
        if (strcmp(name, gc_dtype_name(choices[i])) == 0) {
            *dtype = choices[i];
            return GC_OK;
        }
    gc_set_error(GC_ERR_FORMAT, "%s: metadata 'model.dtype' is '%.40s', expected f32, f16 or bf16", path, name);
    return GC_ERR_FORMAT;
}

gc_status gc_model_file_save(const char *path, const gc_dual_encoder *model) {
    gc_metadata metadata = {0};
    gc_model_describe(model, &metadata);
    gc_status status = gc_safetensors_save(path, &model->params, gc_metadata_entries(&metadata));
    gc_metadata_free(&metadata);
    return status;
}

/* The configuration and tiedness `file` describes. */
static gc_status read_description(const gc_safetensors *file, const char *path, gc_text_encoder_config *config,
                                  bool *tied) {
    const char *format;
    gc_status status = gc_metadata_read_string(file, path, "format", &format);
    if (status != GC_OK) return status;
    if (strcmp(format, MODEL_FORMAT) != 0) {
        gc_set_error(GC_ERR_FORMAT, "%s: format '%s', expected '%s'", path, format, MODEL_FORMAT);
        return GC_ERR_FORMAT;
    }
    *config = gc_model_preset(0, 1); /* the shared architecture; every size is read below */
    int64_t heads = 0, layers = 0, tied_flag = 0;
    struct {
        const char *key;
        int64_t min, max, *value;
    } sizes[] = {
        {"model.vocab", GC_TOKEN_VOCAB, GC_TOKEN_VOCAB, &config->vocab}, /* the tokenizer's ids */
        {"model.max_length", 1, MODEL_MAX_SIZE, &config->max_length},
        {"model.dim", 1, MODEL_MAX_SIZE, &config->dim},
        {"model.heads", 1, MODEL_MAX_SIZE, &heads},
        {"model.layers", 0, 1024, &layers},
        {"model.hidden", 1, MODEL_MAX_SIZE, &config->hidden},
        {"model.projection", 0, MODEL_MAX_SIZE, &config->projection},
        {"model.tied", 0, 1, &tied_flag},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes && status == GC_OK; i++)
        status = gc_metadata_read_int(file, path, sizes[i].key, sizes[i].min, sizes[i].max, sizes[i].value);
    if (status == GC_OK) status = gc_metadata_read_double(file, path, "model.dropout", &config->dropout);
    if (status == GC_OK) status = read_dtype(file, path, &config->dtype);
    if (status != GC_OK) return status;
    config->heads = (int)heads;
    config->layers = (int)layers;
    *tied = tied_flag != 0;
    if (config->dim % config->heads != 0 || config->dropout < 0 || config->dropout >= 1) {
        gc_set_error(GC_ERR_FORMAT, "%s: model.dim %lld is not a multiple of model.heads %d, or model.dropout %g is"
                     " outside [0, 1)", path, (long long)config->dim, config->heads, config->dropout);
        return GC_ERR_FORMAT;
    }
    return GC_OK;
}

/* GC_ERR_FORMAT when the file's tensor data is smaller than the parameters of the model it
 * describes: checked from the header's sizes, before anything is allocated, so that a small
 * file cannot make us build a huge model. (A larger file gets to the exact check, which names
 * the tensor too many.) */
static gc_status check_size(const gc_safetensors *file, const char *path, const gc_text_encoder_config *config,
                            bool tied) {
    uint64_t needed = (uint64_t)(tied ? 1 : 2) * (uint64_t)gc_text_encoder_numel(config) * gc_dtype_size(config->dtype);
    uint64_t held = gc_safetensors_data_size(file);
    if (needed <= held) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: the model it describes (model.dim %lld, model.layers %d, model.hidden %lld, "
                 "model.max_length %lld, model.projection %lld) needs %llu bytes of parameters, the file holds %llu",
                 path, (long long)config->dim, config->layers, (long long)config->hidden,
                 (long long)config->max_length, (long long)config->projection, (unsigned long long)needed,
                 (unsigned long long)held);
    return GC_ERR_FORMAT;
}

gc_status gc_model_file_load_from(const gc_safetensors *file, const char *path, gc_device device,
                                  gc_dual_encoder *model) {
    gc_text_encoder_config config;
    bool tied;
    gc_status status = read_description(file, path, &config, &tied);
    if (status == GC_OK) status = check_size(file, path, &config, tied);
    if (status != GC_OK) return status;
    /* the file's values fill every parameter (gc_safetensors_load_exact): nothing to draw */
    status = gc_dual_encoder_init_unfilled(model, &config, tied, device);
    if (status != GC_OK) return status;
    status = gc_safetensors_load_exact(file, &model->params, NULL);
    if (status != GC_OK) gc_dual_encoder_free(model);
    return status;
}

gc_status gc_model_file_load(const char *path, gc_device device, gc_dual_encoder *model) {
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status != GC_OK) return status;
    status = gc_model_file_load_from(file, path, device, model);
    gc_safetensors_close(file);
    return status;
}
