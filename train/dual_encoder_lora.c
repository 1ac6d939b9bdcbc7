/* A PEFT LoRA adapter folder over a loaded model (gc_lora_load), for encoding and evaluating
 * a base folder plus an adapter folder. */
#include "gradcache/pretrained.h"
#include "gradcache/train.h"

gc_status gc_dual_encoder_add_adapter(gc_dual_encoder *model, const char *dir) {
    if (!model->tied) {
        gc_set_error(GC_ERR_CONFIG, "%s: an adapter folder adapts one encoder, and the model has two towers", dir);
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
