/* How a decoder-family encoder (Llama, Mistral, Qwen2, Qwen3) is laid out in Hugging Face's
 * files (nn/pretrained/layout.h): LlamaModel's names, under "model." in the task models'
 * (LlamaForCausalLM and the like, whose lm_head is outside the encoder). */
#include <stdio.h>

#include "nn/pretrained/layout.h"

static const gc_layout_part outer_parts[] = {
    {"embeddings.tokens.", "embed_tokens.", GC_SIZE_VOCAB, GC_SIZE_HIDDEN, GC_BIAS_NONE},
    {"final_norm.", "norm.", GC_SIZE_HIDDEN, GC_SIZE_NONE, GC_BIAS_NONE},
};
/* inside layer N: "layers.N." -> "layers.N." */
static const gc_layout_part layer_parts[] = {
    {"attention.query.", "self_attn.q_proj.", GC_SIZE_QUERIES, GC_SIZE_HIDDEN, GC_BIAS_QKV},
    {"attention.key.", "self_attn.k_proj.", GC_SIZE_KEYS, GC_SIZE_HIDDEN, GC_BIAS_QKV},
    {"attention.value.", "self_attn.v_proj.", GC_SIZE_KEYS, GC_SIZE_HIDDEN, GC_BIAS_QKV},
    {"attention.output.", "self_attn.o_proj.", GC_SIZE_HIDDEN, GC_SIZE_QUERIES, GC_BIAS_OUTPUT},
    {"attention.query_norm.", "self_attn.q_norm.", GC_SIZE_HEAD_NORM, GC_SIZE_NONE, GC_BIAS_NONE},
    {"attention.key_norm.", "self_attn.k_norm.", GC_SIZE_HEAD_NORM, GC_SIZE_NONE, GC_BIAS_NONE},
    {"attention_norm.", "input_layernorm.", GC_SIZE_HIDDEN, GC_SIZE_NONE, GC_BIAS_NONE},
    {"mlp.gate.", "mlp.gate_proj.", GC_SIZE_INTERMEDIATE, GC_SIZE_HIDDEN, GC_BIAS_MLP},
    {"mlp.in.", "mlp.up_proj.", GC_SIZE_INTERMEDIATE, GC_SIZE_HIDDEN, GC_BIAS_MLP},
    {"mlp.out.", "mlp.down_proj.", GC_SIZE_HIDDEN, GC_SIZE_INTERMEDIATE, GC_BIAS_MLP},
    {"mlp_norm.", "post_attention_layernorm.", GC_SIZE_HIDDEN, GC_SIZE_NONE, GC_BIAS_NONE},
};

static void describe(const gc_text_encoder_config *config, char *text, size_t size) {
    snprintf(text, size, "num_hidden_layers %d, biases of q/k/v %s, of o_proj %s, of the MLP %s", config->layers,
             config->attention.no_qkv_bias ? "no" : "yes", config->attention.no_output_bias ? "no" : "yes",
             config->no_mlp_bias ? "no" : "yes");
}

/* Older checkpoints keep each layer's rotary inverse frequencies, a buffer transformers
 * recomputes. */
const gc_layout gc_decoder_layout = {
    .prefix = "model.",
    .probe = "embed_tokens.weight",
    .layer_stem = "layers.",
    .outer = outer_parts,
    .outer_count = sizeof outer_parts / sizeof *outer_parts,
    .layer = layer_parts,
    .layer_count = sizeof layer_parts / sizeof *layer_parts,
    .encoder_stems = (const char *const[]){"embed_tokens.", "layers.", "norm.", NULL},
    .buffers = (const char *const[]){"*.rotary_emb.inv_freq", NULL},
    .describe = describe,
};
