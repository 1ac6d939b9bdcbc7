/* How a BERT encoder is laid out in Hugging Face's files (nn/pretrained/layout.h), and the BERT
 * loader's public names for the layout's checks (include/gradcache/pretrained.h). */
#include <stdio.h>

#include "nn/pretrained/layout.h"

static const gc_layout_part outer_parts[] = {
    {"embeddings.tokens.", "embeddings.word_embeddings.", GC_SIZE_VOCAB, GC_SIZE_HIDDEN, GC_BIAS_NONE},
    {"embeddings.positions.", "embeddings.position_embeddings.", GC_SIZE_POSITIONS, GC_SIZE_HIDDEN, GC_BIAS_NONE},
    {"embeddings.token_types.", "embeddings.token_type_embeddings.", GC_SIZE_TYPES, GC_SIZE_HIDDEN, GC_BIAS_NONE},
    {"embeddings.norm.", "embeddings.LayerNorm.", GC_SIZE_HIDDEN, GC_SIZE_NONE, GC_BIAS_ALWAYS},
};
/* inside layer N: "layers.N." -> "encoder.layer.N." */
static const gc_layout_part layer_parts[] = {
    {"attention.query.", "attention.self.query.", GC_SIZE_HIDDEN, GC_SIZE_HIDDEN, GC_BIAS_ALWAYS},
    {"attention.key.", "attention.self.key.", GC_SIZE_HIDDEN, GC_SIZE_HIDDEN, GC_BIAS_ALWAYS},
    {"attention.value.", "attention.self.value.", GC_SIZE_HIDDEN, GC_SIZE_HIDDEN, GC_BIAS_ALWAYS},
    {"attention.output.", "attention.output.dense.", GC_SIZE_HIDDEN, GC_SIZE_HIDDEN, GC_BIAS_ALWAYS},
    {"attention_norm.", "attention.output.LayerNorm.", GC_SIZE_HIDDEN, GC_SIZE_NONE, GC_BIAS_ALWAYS},
    {"mlp.in.", "intermediate.dense.", GC_SIZE_INTERMEDIATE, GC_SIZE_HIDDEN, GC_BIAS_ALWAYS},
    {"mlp.out.", "output.dense.", GC_SIZE_HIDDEN, GC_SIZE_INTERMEDIATE, GC_BIAS_ALWAYS},
    {"mlp_norm.", "output.LayerNorm.", GC_SIZE_HIDDEN, GC_SIZE_NONE, GC_BIAS_ALWAYS},
};

static void describe(const gc_text_encoder_config *config, char *text, size_t size) {
    snprintf(text, size, "num_hidden_layers %d, type_vocab_size %lld", config->layers, (long long)config->type_vocab);
}

/* BertModel writes bare names; the task models (BertForMaskedLM, ...) put theirs under "bert.".
 * The pooler is outside the encoder; position_ids is a buffer transformers rebuilds. */
const gc_layout gc_bert_layout = {
    .prefix = "bert.",
    .probe = "embeddings.word_embeddings.weight",
    .layer_stem = "encoder.layer.",
    .outer = outer_parts,
    .outer_count = sizeof outer_parts / sizeof *outer_parts,
    .layer = layer_parts,
    .layer_count = sizeof layer_parts / sizeof *layer_parts,
    .encoder_stems = (const char *const[]){"embeddings.", "encoder.", NULL},
    .buffers = (const char *const[]){"embeddings.position_ids", NULL},
    .describe = describe,
};

bool gc_bert_weight_name(const char *name, char name_out[GC_PARAM_NAME_MAX]) {
    return gc_layout_name(&gc_bert_layout, name, name_out);
}

gc_status gc_bert_check_weights(const gc_safetensors *file, const gc_text_encoder_config *config,
                                const char *config_name) {
    if (gc_layout_of(config) != &gc_bert_layout)
        gc_fatal("bert_check_weights: a pre-norm encoder or one with a projection has no BERT layout");
    gc_weight_files files = {.files = (gc_safetensors **)&file, .count = 1};
    return gc_layout_check(&gc_bert_layout, &files, config, config_name);
}
