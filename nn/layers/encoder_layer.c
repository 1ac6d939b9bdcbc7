/* A transformer encoder layer: attention then an MLP, each a residual block, with the
 * LayerNorm after the residual add (post-norm, BERT) or before the sublayer (pre-norm; the
 * decoder family's, with RMSNorms). */
#include "layer_util.h"

/* A norm of the layer: LayerNorm, or RMSNorm for the decoder family. */
static gc_status norm_init(gc_layernorm_layer *norm, const gc_text_encoder_config *c, gc_device device) {
    double eps = c->layernorm_eps ? c->layernorm_eps : GC_NN_LAYERNORM_EPS;
    return c->rms_norm ? gc_rmsnorm_layer_init(norm, c->dim, eps, c->dtype, device)
                       : gc_layernorm_layer_init(norm, c->dim, eps, c->dtype, device);
}

gc_status gc_encoder_layer_init(gc_encoder_layer *layer, const gc_text_encoder_config *c, gc_device device,
                                gc_generator *init) {
    gc_nn_check_dropout("encoder_layer", c->dropout);
    *layer = (gc_encoder_layer){.dropout = c->dropout, .pre_norm = c->pre_norm};
    gc_status status = gc_attention_init(&layer->attention, c->dim, c->heads, c->dropout, &c->attention, c->dtype,
                                         device, init);
    if (status == GC_OK) status = norm_init(&layer->attention_norm, c, device);
    /* BERT drops nothing between the MLP's two Linears: only the block's output, below */
    if (status == GC_OK)
        status = c->gated_mlp ? gc_gated_mlp_init(&layer->mlp, c->dim, c->hidden, !c->no_mlp_bias, c->dtype, device, init)
                              : gc_mlp_init(&layer->mlp, c->dim, c->hidden, c->activation, 0, c->dtype, device, init);
    if (status == GC_OK) status = norm_init(&layer->mlp_norm, c, device);
    if (status != GC_OK) gc_encoder_layer_free(layer);
    return status;
}

/* The two sublayers, one signature: x [B, T, dim] -> [B, T, dim], or [N, dim] -> [N, dim] when
 * the inputs pack the real tokens (gc_token_packing). */
typedef gc_tensor *(*sublayer_forward)(const gc_encoder_layer *layer, const gc_tensor *x,
                                       const gc_attention_inputs *inputs, bool training);

static gc_tensor *attention_sublayer(const gc_encoder_layer *layer, const gc_tensor *x,
                                     const gc_attention_inputs *inputs, bool training) {
    return gc_attention_forward_with(&layer->attention, x, inputs, training);
}

static gc_tensor *mlp_sublayer(const gc_encoder_layer *layer, const gc_tensor *x, const gc_attention_inputs *inputs,
                               bool training) {
    /* the MLP works token by token: padding cannot reach a real token through it; the packing
     * is for its adapters' dropout masks */
    return gc_mlp_forward_with(&layer->mlp, x, training, inputs->packing);
}

/* norm(x + dropout(f(x))) post-norm, x + dropout(f(norm(x))) pre-norm; x [B, T, dim] or [N, dim]. */
static gc_tensor *residual_block(const gc_encoder_layer *layer, const gc_tensor *x, sublayer_forward sublayer,
                                 const gc_layernorm_layer *norm, const gc_attention_inputs *inputs, bool training) {
    gc_tensor *input = layer->pre_norm ? gc_layernorm_layer_forward(norm, x) : gc_tensor_retain((gc_tensor *)x);
    gc_tensor *update = gc_nn_then(input, sublayer(layer, input, inputs, training));
    update = gc_nn_then(update, gc_tokens_dropout(update, layer->dropout, training, inputs->packing));
    gc_tensor *sum = gc_nn_then(update, gc_add(x, update));
    return layer->pre_norm ? sum : gc_nn_then(sum, gc_layernorm_layer_forward(norm, sum));
}

gc_tensor *gc_encoder_layer_forward_with(const gc_encoder_layer *layer, const gc_tensor *x /* [B, T, dim] */,
                                         const gc_attention_inputs *inputs, bool training) {
    if (!x) return NULL;
    gc_tensor *h = residual_block(layer, x, attention_sublayer, &layer->attention_norm, inputs, training);
    return gc_nn_then(h, residual_block(layer, h, mlp_sublayer, &layer->mlp_norm, inputs, training));
}

gc_tensor *gc_encoder_layer_forward(const gc_encoder_layer *layer, const gc_tensor *x /* [B, T, dim] */,
                                    const gc_tensor *mask /* [B, T] or NULL */, bool training) {
    if (!x) return NULL;
    gc_attention_inputs inputs;
    if (gc_attention_inputs_make(&layer->attention, x, mask, &inputs) != GC_OK) return NULL;
    gc_tensor *y = gc_encoder_layer_forward_with(layer, x, &inputs, training);
    gc_attention_inputs_free(&inputs);
    return y;
}

void gc_encoder_layer_params(const gc_encoder_layer *layer, const char *prefix, gc_param_list *list) {
    char name[GC_PARAM_NAME_MAX];
    gc_attention_params(&layer->attention, gc_nn_join(name, prefix, "attention"), list);
    gc_layernorm_layer_params(&layer->attention_norm, gc_nn_join(name, prefix, "attention_norm"), list);
    gc_mlp_params(&layer->mlp, gc_nn_join(name, prefix, "mlp"), list);
    gc_layernorm_layer_params(&layer->mlp_norm, gc_nn_join(name, prefix, "mlp_norm"), list);
}

void gc_encoder_layer_free(gc_encoder_layer *layer) {
    gc_attention_free(&layer->attention);
    gc_layernorm_layer_free(&layer->attention_norm);
    gc_mlp_free(&layer->mlp);
    gc_layernorm_layer_free(&layer->mlp_norm);
}
