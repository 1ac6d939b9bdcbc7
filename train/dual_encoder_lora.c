/* A PEFT LoRA adapter folder over a loaded model (gc_lora_load), for encoding and evaluating
 * a base folder plus an adapter folder, or the run folder of a train --lora-r run, which names
 * its base itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/pretrained.h"
#include "gradcache/train.h"

/* Whether the model has adapters already: a second set over them would be another model. */
static bool has_adapters(const gc_dual_encoder *model) {
    for (int i = 0; i < model->params.count; i++)
        if (strstr(model->params.items[i].name, ".lora_")) return true;
    return false;
}

gc_status gc_dual_encoder_add_adapter(gc_dual_encoder *model, const char *dir) {
    if (!model->tied) {
        gc_set_error(GC_ERR_CONFIG, "%s: an adapter folder adapts one encoder, and the model has two towers", dir);
        return GC_ERR_CONFIG;
    }
    if (has_adapters(model)) {
        gc_set_error(GC_ERR_CONFIG, "%s: the model has adapters already (a LoRA run folder's own)", dir);
        return GC_ERR_CONFIG;
    }
    gc_lora_config config;
    char targets[1024];
    gc_status status = gc_lora_load(dir, &model->towers[0], &config, targets, sizeof targets);
    if (status != GC_OK) return status;
    /* the adapters are parameters of the model now */
    gc_param_list_free(&model->params);
    gc_text_encoder_params(&model->towers[0], "encoder", &model->params);
    return GC_OK;
}

static bool exists(const char *dir, const char *name) {
    char *path = gc_path_join(dir, name);
    struct stat info;
    bool found = stat(path, &info) == 0;
    free(path);
    return found;
}

bool gc_is_lora_run(const char *path) {
    return exists(path, "adapter/adapter_config.json") && !exists(path, "config.json");
}

gc_status gc_dual_encoder_from_lora_run(gc_dual_encoder *model, const char *run, int64_t max_length, gc_dtype dtype,
                                        gc_device device) {
    char *adapter = gc_path_join(run, "adapter");
    char base[4096];
    gc_status status = gc_lora_base_model(adapter, base, sizeof base);
    if (status == GC_OK && !exists(base, "config.json")) {
        gc_set_error(GC_ERR_IO, "%s: the base model its adapter names (base_model_name_or_path of "
                                "adapter/adapter_config.json), '%s', is not a model folder (no config.json)",
                     run, base);
        status = GC_ERR_IO;
    }
    if (status == GC_OK) status = gc_dual_encoder_from_folder(model, base, max_length, dtype, device);
    if (status == GC_OK && (status = gc_dual_encoder_add_adapter(model, adapter)) != GC_OK)
        gc_dual_encoder_free(model); /* as gc_dual_encoder_load: nothing left on failure */
    if (status == GC_ERR_CONFIG) {
        /* an adapter that does not fit the base its own folder names: the run folder is at fault,
         * not a setting of the caller's */
        char message[1024];
        snprintf(message, sizeof message, "%s", gc_last_error());
        gc_set_error(GC_ERR_FORMAT, "%s", message);
        status = GC_ERR_FORMAT;
    }
    free(adapter);
    return status;
}
