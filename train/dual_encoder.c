/* The dual encoder and its presets (see gradcache/train.h): BERT-style post-norm encoders
 * over the byte vocabulary, mean-pooled and projected. */
#include <stdio.h>
#include <stdlib.h>

#include "gradcache/train.h"
#include "model_file.h"

const char *const gc_model_size_names[] = {"tiny", "small", "base", NULL};

gc_text_encoder_config gc_model_preset(int size_index, int64_t max_length) {
    static const struct {
        int64_t dim;
        int heads, layers;
        int64_t hidden, projection;
    } sizes[] = {
        {64, 4, 2, 128, 64},     /* tiny: seconds per step on a laptop core, for tests */
        {128, 4, 4, 512, 128},   /* small */
        {256, 8, 6, 1024, 256},  /* base */
    };
    if (size_index < 0 || size_index >= (int)(sizeof sizes / sizeof *sizes))
        gc_fatal("model_preset: no preset %d (0 to %d)", size_index, (int)(sizeof sizes / sizeof *sizes) - 1);
    return (gc_text_encoder_config){.vocab = GC_TOKEN_VOCAB,
                                    .max_length = max_length,
                                    .dim = sizes[size_index].dim,
                                    .heads = sizes[size_index].heads,
                                    .layers = sizes[size_index].layers,
                                    .hidden = sizes[size_index].hidden,
                                    .projection = sizes[size_index].projection,
                                    .dropout = 0.1,
                                    .pre_norm = false,
                                    .activation = GC_ACT_GELU_ERF,
                                    .pooling = GC_POOL_MEAN,
                                    .dtype = GC_F32};
}

/* The towers of `model`, initialised from `init` (NULL: weights left 0, to be loaded). */
static gc_status build_towers(gc_dual_encoder *model, const gc_text_encoder_config *config, bool tied,
                              gc_device device, gc_generator *init) {
    static const char *const dual_names[] = {"query", "passage"};
    *model = (gc_dual_encoder){.tied = tied};
    model->tokenizer = gc_tokenizer_bytes();
    model->max_length = config->max_length;
    int towers = tied ? 1 : 2;
    for (int t = 0; t < towers; t++) {
        gc_status status = gc_text_encoder_init(&model->towers[t], config, device, init);
        if (status != GC_OK) {
            for (int done = 0; done < t; done++) gc_text_encoder_free(&model->towers[done]);
            gc_param_list_free(&model->params);
            return status;
        }
        gc_text_encoder_params(&model->towers[t], tied ? "encoder" : dual_names[t], &model->params);
    }
    return GC_OK;
}

gc_status gc_dual_encoder_init(gc_dual_encoder *model, const gc_text_encoder_config *config, bool tied,
                               gc_device device, uint64_t seed) {
    /* One generator for both towers: the passage tower continues the stream where the query
     * tower stopped, so the two start from different weights. */
    gc_generator init = {seed, 0};
    return build_towers(model, config, tied, device, &init);
}

gc_status gc_dual_encoder_init_unfilled(gc_dual_encoder *model, const gc_text_encoder_config *config, bool tied,
                                        gc_device device) {
    return build_towers(model, config, tied, device, NULL);
}

gc_text_encoder *gc_dual_encoder_tower(gc_dual_encoder *model, int side) {
    if (side != 0 && side != 1) gc_fatal("dual_encoder_tower: side %d is neither 0 (query) nor 1 (passage)", side);
    return &model->towers[model->tied ? 0 : side];
}

gc_status gc_dual_encoder_check_prompt(const gc_dual_encoder *model, const char *prompt, const char *what) {
    int32_t *ids = malloc((size_t)model->max_length * sizeof *ids);
    if (!ids) gc_fatal("dual_encoder_check_prompt: out of host memory for %lld token ids", (long long)model->max_length);
    int64_t length = gc_tokenizer_encode(model->tokenizer, prompt, model->max_length, ids);
    free(ids);
    if (length < 0) return gc_last_status();
    if (length < model->max_length) return GC_OK;
    /* its special tokens included: what a text would get */
    gc_set_error(GC_ERR_CONFIG, "%s is %lld tokens or more, leaving none of the %lld tokens per text for the text", what,
                 (long long)length, (long long)model->max_length);
    return GC_ERR_CONFIG;
}

gc_status gc_dual_encoder_check_prompts(const gc_dual_encoder *model) {
    gc_status status = GC_OK;
    for (int side = 0; side < 2 && status == GC_OK; side++) {
        if (!model->prompts[side]) continue;
        char what[4200];
        snprintf(what, sizeof what, "%s/config_sentence_transformers.json: the %s prompt", model->pretrained,
                 side ? "document" : "query");
        status = gc_dual_encoder_check_prompt(model, model->prompts[side], what);
    }
    return status;
}

gc_tensor *gc_dual_encoder_encode(gc_dual_encoder *model, int side, const char *const *texts, int64_t count,
                                  int64_t batch) {
    if (gc_dual_encoder_check_prompts(model) != GC_OK) return NULL;
    return gc_encode_texts_prompted(gc_dual_encoder_tower(model, side), model->tokenizer, model->prompts[side], texts,
                                    count, model->max_length, batch);
}

void gc_dual_encoder_free(gc_dual_encoder *model) {
    gc_param_list_free(&model->params);
    for (int t = 0; t < (model->tied ? 1 : 2); t++) gc_text_encoder_free(&model->towers[t]);
    gc_tokenizer_free(model->tokenizer);
    gc_bert_unused_free(&model->unused);
    free(model->pretrained);
    free(model->prompts[0]);
    free(model->prompts[1]);
    *model = (gc_dual_encoder){0};
}

gc_tensor *gc_dual_encoder_forward_train(void *tower, const gc_batch *chunk) {
    /* chunk: ids i32 [rows, T], mask f32 [rows, T] (as gc_tokenize makes them) */
    return gc_text_encoder_forward(tower, chunk->tensors[0], chunk->tensors[1], true);
}
