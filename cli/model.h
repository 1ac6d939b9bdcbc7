/* The trainer's models: text-encoder presets and the towers of a dual or tied encoder. */
#ifndef GC_CLI_MODEL_H
#define GC_CLI_MODEL_H

#include <stdbool.h>

#include "gradcache/gradcache.h"

/* Preset names, NULL-terminated ("tiny", "small", "base"): see model.c for the sizes. */
extern const char *const gc_model_size_names[];
/* The text-encoder configuration of a preset (byte-level vocabulary, f32). */
gc_text_encoder_config gc_model_preset(int size_index, int64_t max_length);

/* A query tower and a passage tower; tied: one encoder used for both. */
typedef struct gc_dual_encoder {
    bool tied;
    gc_text_encoder towers[2];  /* [1] unused when tied */
    gc_param_list params;       /* "query.*" and "passage.*", or "encoder.*" when tied */
    const gc_tokenizer *tokenizer; /* bytes for a preset; a pretrained folder's WordPiece (owned) */
    int64_t max_length;         /* tokens per text */
    char *pretrained;           /* the folder a pretrained model came from (model_folder.h), else NULL */
    gc_bert_unused unused;      /* pretrained: the file's weights the encoder does not use, saved back */
} gc_dual_encoder;

/* A preset's model: random weights from `seed`, the byte tokenizer, config->max_length tokens. */
gc_status gc_dual_encoder_init(gc_dual_encoder *model, const gc_text_encoder_config *config, bool tied,
                               gc_device device, uint64_t seed);
gc_text_encoder *gc_dual_encoder_tower(gc_dual_encoder *model, int side); /* 0 query, 1 passage */
void gc_dual_encoder_free(gc_dual_encoder *model);
/* GradCache's model function for a tower: chunk {ids, mask} -> representation. */
gc_tensor *gc_dual_encoder_forward_train(void *tower, const gc_batch *chunk);

#endif
