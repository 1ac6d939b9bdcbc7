/* Multi-head self-attention with a padding mask, as BERT computes it:
 *     softmax(Q K^T / sqrt(Dh) + (mask - 1) 10000) V
 * per head, each head a Dh = dim / heads slice of the projections. */
#include <math.h>

#include "layer_util.h"

/* The four projections, in the order of their initialisation and of their names. */
#define PROJECTIONS(layer) {&(layer)->query, &(layer)->key, &(layer)->value, &(layer)->output}
static const char *const projection_names[4] = {"query", "key", "value", "output"};

gc_status gc_attention_init(gc_attention *layer, int64_t dim, int heads, double dropout, gc_dtype dtype,
                            gc_device device, gc_generator *init) {
    if (heads <= 0 || dim <= 0 || dim % heads != 0)
        gc_fatal("attention: dim %lld does not split into %d heads", (long long)dim, heads);
    gc_nn_check_dropout("attention", dropout);
    *layer = (gc_attention){.heads = heads, .dropout = dropout};
    gc_linear *projections[4] = PROJECTIONS(layer);
    for (int i = 0; i < 4; i++) {
        gc_status status = gc_linear_init(projections[i], dim, dim, true, dtype, device, init);
        if (status != GC_OK) {
            gc_attention_free(layer);
            return status;
        }
    }
    return GC_OK;
}

/* x [B, T, dim] -> [B * H, T, Dh]: the projection, with each head's slice brought together
 * so that one batched matmul serves every (sequence, head) pair. */
static gc_tensor *project_heads(const gc_linear *projection, const gc_tensor *x, int heads) {
    int64_t batch = x->shape[0], length = x->shape[1], head_dim = x->shape[2] / heads;
    gc_tensor *y = gc_linear_forward(projection, x);
    y = gc_nn_then(y, gc_reshape(y, GC_SHAPE(batch, length, heads, head_dim)));
    y = gc_nn_then(y, gc_permute(y, (const int[]){0, 2, 1, 3})); /* [B, H, T, Dh] */
    return gc_nn_then(y, gc_reshape(y, GC_SHAPE(batch * heads, length, head_dim)));
}

/* scores [B * H, T, T] + (mask [B, T] - 1) 10000, broadcast over heads and queries. */
static gc_tensor *add_padding_bias(const gc_tensor *scores, const gc_tensor *mask, int heads) {
    int64_t batch = mask->shape[0], length = mask->shape[1];
    gc_tensor *bias = gc_sub_scalar(mask, 1);
    bias = gc_nn_then(bias, gc_mul_scalar(bias, 10000));
    bias = gc_nn_then(bias, gc_reshape(bias, GC_SHAPE(batch, 1, 1, length)));
    gc_tensor *per_head = gc_reshape(scores, GC_SHAPE(batch, heads, length, length));
    gc_tensor *biased = gc_add(per_head, bias);
    gc_tensor_release(per_head);
    gc_tensor_release(bias);
    return gc_nn_then(biased, gc_reshape(biased, GC_SHAPE(batch * heads, length, length)));
}

static void check_inputs(const gc_attention *layer, const gc_tensor *x, const gc_tensor *mask) {
    char x_text[128];
    int64_t dim = layer->query.weight->shape[1];
    if (x->ndim != 3 || x->shape[2] != dim)
        gc_fatal("attention: x %s is not [B, T, %lld]", gc_tensor_str(x, x_text, sizeof x_text), (long long)dim);
    gc_nn_check_mask("attention", mask, x->shape[0], x->shape[1], x->dtype, x->device);
}

gc_tensor *gc_attention_forward(const gc_attention *layer, const gc_tensor *x /* [B, T, dim] */,
                                const gc_tensor *mask /* [B, T] or NULL */, bool training) {
    if (!x) return NULL;
    check_inputs(layer, x, mask);
    int heads = layer->heads;
    int64_t batch = x->shape[0], length = x->shape[1], dim = x->shape[2], head_dim = dim / heads;
    gc_tensor *query = project_heads(&layer->query, x, heads); /* [B * H, T, Dh] */
    gc_tensor *key = project_heads(&layer->key, x, heads);
    gc_tensor *scores = gc_matmul(query, key, false, true); /* [B * H, T, T] */
    gc_tensor_release(query);
    gc_tensor_release(key);
    scores = gc_nn_then(scores, gc_mul_scalar(scores, 1 / sqrt((double)head_dim)));
    if (mask) scores = gc_nn_then(scores, add_padding_bias(scores, mask, heads));
    gc_tensor *probs = gc_nn_then(scores, gc_softmax(scores));
    probs = gc_nn_then(probs, gc_nn_dropout(probs, layer->dropout, training));

    gc_tensor *value = project_heads(&layer->value, x, heads);
    gc_tensor *context = gc_matmul(probs, value, false, false); /* [B * H, T, Dh] */
    gc_tensor_release(probs);
    gc_tensor_release(value);
    context = gc_nn_then(context, gc_reshape(context, GC_SHAPE(batch, heads, length, head_dim)));
    context = gc_nn_then(context, gc_permute(context, (const int[]){0, 2, 1, 3})); /* [B, T, H, Dh] */
    context = gc_nn_then(context, gc_reshape(context, GC_SHAPE(batch, length, dim)));
    return gc_nn_then(context, gc_linear_forward(&layer->output, context));
}

void gc_attention_params(const gc_attention *layer, const char *prefix, gc_param_list *list) {
    char name[GC_PARAM_NAME_MAX];
    const gc_linear *projections[4] = PROJECTIONS(layer);
    for (int i = 0; i < 4; i++) gc_linear_params(projections[i], gc_nn_join(name, prefix, projection_names[i]), list);
}

void gc_attention_free(gc_attention *layer) {
    gc_linear *projections[4] = PROJECTIONS(layer);
    for (int i = 0; i < 4; i++) gc_linear_free(projections[i]);
}
