/* A text encoder: token and position embeddings, a stack of encoder layers, pooling to one
 * vector per sequence, and an optional projection. The decoder family's models are such an
 * encoder too (gradcache/nn.h): pre-norm RMSNorm layers with rotary positions, which take
 * the learned table's place. */
#include <stdlib.h>

#include "layer_util.h"

/* Positions come from a learned table unless the attention rotates them. */
static bool learned_positions(const gc_text_encoder_config *config) { return !(config->attention.rope_theta > 0); }

static void check_config(const gc_text_encoder_config *config) {
    if (config->vocab <= 0 || config->max_length <= 0 || config->layers < 0 || config->projection < 0 ||
        config->type_vocab < 0 || config->layernorm_eps < 0)
        gc_fatal("text_encoder: needs a positive vocab and max_length and no negative layers, projection, type_vocab "
                 "or layernorm_eps, got vocab %lld, max_length %lld, layers %d, projection %lld, type_vocab %lld, "
                 "layernorm_eps %g", (long long)config->vocab, (long long)config->max_length, config->layers,
                 (long long)config->projection, (long long)config->type_vocab, config->layernorm_eps);
    gc_nn_check_dropout("text_encoder", config->dropout);
}

/* Every part in the order the parameters are drawn from `init`; a part the config leaves
 * out (a norm, the projection) stays zeroed. */
static gc_status init_parts(gc_text_encoder *encoder, gc_device device, gc_generator *init) {
    const gc_text_encoder_config *c = &encoder->config;
    double eps = c->layernorm_eps ? c->layernorm_eps : GC_NN_LAYERNORM_EPS;
    gc_status status = gc_embedding_layer_init(&encoder->tokens, c->vocab, c->dim, c->dtype, device, init);
    if (status == GC_OK && learned_positions(c))
        status = gc_embedding_layer_init(&encoder->positions, c->max_length, c->dim, c->dtype, device, init);
    if (status == GC_OK && c->type_vocab)
        status = gc_embedding_layer_init(&encoder->token_types, c->type_vocab, c->dim, c->dtype, device, init);
    if (status == GC_OK && !c->pre_norm)
        status = gc_layernorm_layer_init(&encoder->embedding_norm, c->dim, eps, c->dtype, device);
    for (int i = 0; status == GC_OK && i < c->layers; i++)
        status = gc_encoder_layer_init(&encoder->layers[i], c, device, init);
    if (status == GC_OK && c->pre_norm)
        status = c->rms_norm ? gc_rmsnorm_layer_init(&encoder->final_norm, c->dim, eps, c->dtype, device)
                             : gc_layernorm_layer_init(&encoder->final_norm, c->dim, eps, c->dtype, device);
    if (status == GC_OK && c->projection)
        status = gc_linear_init(&encoder->projection, c->dim, c->projection, true, c->dtype, device, init);
    return status;
}

gc_status gc_text_encoder_init(gc_text_encoder *encoder, const gc_text_encoder_config *config, gc_device device,
                               gc_generator *init) {
    check_config(config);
    *encoder = (gc_text_encoder){.config = *config};
    /* calloc: a layer not reached by a failed init is zeroed, which its free accepts */
    encoder->layers = calloc(config->layers ? (size_t)config->layers : 1, sizeof *encoder->layers);
    if (!encoder->layers) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "text_encoder: no host memory for %d layers", config->layers);
        return GC_ERR_OUT_OF_MEMORY;
    }
    gc_status status = init_parts(encoder, device, init);
    if (status != GC_OK) gc_text_encoder_free(encoder);
    return status;
}

int64_t gc_text_encoder_numel(const gc_text_encoder_config *config) {
    check_config(config);
    const gc_attention_options *a = &config->attention;
    int64_t d = config->dim, hidden = config->hidden, norm = config->rms_norm ? d : 2 * d;
    int64_t head_dim = a->head_dim ? a->head_dim : d / config->heads;
    int64_t queries = config->heads * head_dim, keys = (a->kv_heads ? a->kv_heads : config->heads) * head_dim;
    int64_t attention = (d * queries + 2 * d * keys) + (a->no_qkv_bias ? 0 : queries + 2 * keys) + /* q, k, v */
                        queries * d + (a->no_output_bias ? 0 : d) +                              /* output */
                        (a->qk_norm_eps > 0 ? 2 * head_dim : 0);                                 /* q, k norms */
    int64_t mlp = config->gated_mlp ? 3 * d * hidden + (config->no_mlp_bias ? 0 : 2 * hidden + d)
                                    : 2 * d * hidden + hidden + d;
    int64_t embeddings = (config->vocab + (learned_positions(config) ? config->max_length : 0) + config->type_vocab) * d;
    int64_t projection = config->projection ? config->projection * d + config->projection : 0;
    /* one norm outside the layers: the embedding norm (post-norm) or the final norm (pre-norm) */
    return embeddings + norm + config->layers * (attention + mlp + 2 * norm) + projection;
}

static void check_inputs(const gc_text_encoder *encoder, const gc_tensor *ids, const gc_tensor *mask) {
    char ids_text[128];
    const gc_tensor *table = encoder->tokens.weight;
    if (ids->dtype != GC_I32 || ids->ndim != 2 || !gc_device_equal(ids->device, table->device))
        gc_fatal("text_encoder: ids %s are not i32 [B, T] on the encoder's device",
                 gc_tensor_str(ids, ids_text, sizeof ids_text));
    if (ids->shape[1] < 1 || ids->shape[1] > encoder->config.max_length)
        gc_fatal("text_encoder: ids %s have %lld tokens, outside [1, max_length %lld]",
                 gc_tensor_str(ids, ids_text, sizeof ids_text), (long long)ids->shape[1],
                 (long long)encoder->config.max_length);
    gc_nn_check_mask("text_encoder", mask, ids->shape[0], ids->shape[1], table->dtype, table->device);
}

/* ids i32 [B, T] -> [B, T, dim]: each token's vector, plus type 0's (BERT adds it first), plus
 * its position's when they are learned. */
static gc_tensor *embed(const gc_text_encoder *encoder, const gc_tensor *ids) {
    gc_tensor *token_vectors = gc_embedding_layer_forward(&encoder->tokens, ids);
    if (encoder->config.type_vocab) {
        gc_tensor *type = gc_zeros(GC_SHAPE(1), GC_I32, ids->device);
        gc_tensor *type_vector = gc_nn_then(type, gc_embedding_layer_forward(&encoder->token_types, type)); /* [1, dim] */
        gc_tensor *typed = gc_add(token_vectors, type_vector);
        gc_tensor_release(type_vector);
        token_vectors = gc_nn_then(token_vectors, typed);
    }
    if (!learned_positions(&encoder->config)) return token_vectors;
    gc_tensor *positions = gc_arange(ids->shape[1], 0, 1, GC_I32, ids->device);
    gc_tensor *position_vectors = gc_nn_then(positions, gc_embedding_layer_forward(&encoder->positions, positions));
    gc_tensor *sum = gc_add(token_vectors, position_vectors); /* [T, dim] broadcasts over B */
    gc_tensor_release(token_vectors);
    gc_tensor_release(position_vectors);
    return sum;
}

/* The hidden states of ids [B, T]: [B, T, dim], or [N, dim] for the N real tokens when
 * `packing` (of mask) is given. */
static gc_tensor *hidden_states(const gc_text_encoder *encoder, const gc_tensor *ids /* i32 [B, T] */,
                                const gc_tensor *mask /* [B, T] or NULL */, bool training,
                                const gc_token_packing *packing) {
    const gc_text_encoder_config *config = &encoder->config;
    gc_tensor *h = embed(encoder, ids); /* [B, T, dim] */
    /* every layer's attention is configured alike: one set of inputs (bias, rotary table) serves all */
    gc_attention_inputs inputs = {.mask = mask};
    if (h && config->layers && gc_attention_inputs_make(&encoder->layers[0].attention, h, mask, &inputs) != GC_OK)
        h = gc_nn_then(h, NULL);
    inputs.packing = packing;
    if (packing) h = gc_nn_then(h, gc_tokens_pack(h, packing)); /* [N, dim] */
    if (!config->pre_norm) h = gc_nn_then(h, gc_layernorm_layer_forward(&encoder->embedding_norm, h));
    h = gc_nn_then(h, gc_tokens_dropout(h, config->dropout, training, packing));
    for (int i = 0; i < config->layers; i++)
        h = gc_nn_then(h, encoder->checkpoint_layers
                              ? gc_encoder_layer_forward_checkpointed(&encoder->layers[i], h, &inputs, training)
                              : gc_encoder_layer_forward_with(&encoder->layers[i], h, &inputs, training));
    gc_attention_inputs_free(&inputs);
    if (config->pre_norm) h = gc_nn_then(h, gc_layernorm_layer_forward(&encoder->final_norm, h));
    return h;
}

gc_tensor *gc_text_encoder_hidden(const gc_text_encoder *encoder, const gc_tensor *ids /* i32 [B, T] */,
                                  const gc_tensor *mask /* [B, T] or NULL */, bool training) {
    if (!ids) return NULL;
    check_inputs(encoder, ids, mask);
    return hidden_states(encoder, ids, mask, training, NULL);
}

gc_tensor *gc_text_encoder_forward(const gc_text_encoder *encoder, const gc_tensor *ids /* i32 [B, T] */,
                                   const gc_tensor *mask /* [B, T] or NULL */, bool training) {
    if (!ids) return NULL;
    check_inputs(encoder, ids, mask);
    const gc_text_encoder_config *config = &encoder->config;
    /* The forward skips the padding in all but attention (gc_token_packing): every real
     * token's row is computed as the padded forward computes it, and padding, which no real
     * token's row reads, is dropped (each packed row drops out with its own position's mask).
     * The pooled output is the padded forward's bit for bit. In training the mask must be in
     * host memory: on a GPU, reading it would make every chunk wait. With a graph, the
     * gradients are the padded forward's up to rounding: its padding rows contribute exact
     * zeros to the sums over rows (weights, biases, norms), which a packed graph leaves out,
     * so only the grouping of those sums changes. */
    gc_token_packing packing;
    bool mask_on_host = mask && mask->device.type == GC_DEVICE_CPU;
    bool packed = mask && (!training || mask_on_host) && gc_token_packing_make(mask, &packing);
    gc_tensor *h = hidden_states(encoder, ids, mask, training, packed ? &packing : NULL);
    if (packed) {
        h = gc_nn_then(h, gc_tokens_unpack(h, &packing)); /* [B, T, dim], padding rows 0 */
        gc_token_packing_free(&packing);
    }
    h = gc_nn_then(h, gc_pool(h, mask, config->pooling)); /* [B, dim] */
    if (config->projection) h = gc_nn_then(h, gc_linear_forward_with(&encoder->projection, h, training, NULL));
    if (config->normalize) h = gc_nn_then(h, gc_l2_normalize(h, 1e-12));
    return h;
}

void gc_text_encoder_params(const gc_text_encoder *encoder, const char *prefix, gc_param_list *list) {
    const gc_text_encoder_config *config = &encoder->config;
    char name[GC_PARAM_NAME_MAX], layer_name[32];
    gc_embedding_layer_params(&encoder->tokens, gc_nn_join(name, prefix, "embeddings.tokens"), list);
    if (learned_positions(config))
        gc_embedding_layer_params(&encoder->positions, gc_nn_join(name, prefix, "embeddings.positions"), list);
    if (config->type_vocab)
        gc_embedding_layer_params(&encoder->token_types, gc_nn_join(name, prefix, "embeddings.token_types"), list);
    if (!config->pre_norm)
        gc_layernorm_layer_params(&encoder->embedding_norm, gc_nn_join(name, prefix, "embeddings.norm"), list);
    for (int i = 0; i < config->layers; i++) {
        snprintf(layer_name, sizeof layer_name, "layers.%d", i);
        gc_encoder_layer_params(&encoder->layers[i], gc_nn_join(name, prefix, layer_name), list);
    }
    if (config->pre_norm) gc_layernorm_layer_params(&encoder->final_norm, gc_nn_join(name, prefix, "final_norm"), list);
    if (config->projection) gc_linear_params(&encoder->projection, gc_nn_join(name, prefix, "projection"), list);
}

void gc_text_encoder_free(gc_text_encoder *encoder) {
    gc_embedding_layer_free(&encoder->tokens);
    gc_embedding_layer_free(&encoder->positions);
    gc_embedding_layer_free(&encoder->token_types);
    gc_layernorm_layer_free(&encoder->embedding_norm);
    for (int i = 0; encoder->layers && i < encoder->config.layers; i++) gc_encoder_layer_free(&encoder->layers[i]);
    free(encoder->layers);
    gc_layernorm_layer_free(&encoder->final_norm);
    gc_linear_free(&encoder->projection);
    *encoder = (gc_text_encoder){0};
}
