/* Multi-head self-attention with a padding mask, as BERT computes it,
 *     softmax(Q K^T / sqrt(Dh) + bias) V
 * per head, the bias -10000 on every key a query may not see; and the decoder family's
 * variants (gradcache/nn.h, gc_attention_options): grouped-query attention, a causal mask,
 * rotary positions, RMSNorms of the heads' queries and keys, projections without biases.
 *
 * Grouped-query attention without copies: query head h uses key/value head h / G (G = heads /
 * kv_heads, transformers' repeat_kv), so the G query heads of one key head are adjacent and
 * the queries [B, H, T, Dh] are [B * kv_heads, G * T, Dh] as they lie: one batched matmul
 * against the keys [B * kv_heads, T, Dh] gives every head's scores, [B, H, T, T] as they lie.
 * With kv_heads = heads (BERT) this is plain multi-head attention.
 *
 * Fused (gc_fused_attention()) the same function is one op, gc_attention_fused, computed tile
 * by tile without the scores (docs/DESIGN.md, "Fused attention"). */
#include <math.h>

#include "layer_util.h"

/* The four projections, in the order of their initialisation and of their names. */
#define PROJECTIONS(layer) {&(layer)->query, &(layer)->key, &(layer)->value, &(layer)->output}
static const char *const projection_names[4] = {"query", "key", "value", "output"};

/* options with kv_heads and head_dim filled in, checked against dim and heads. */
static gc_attention_options resolved(int64_t dim, int heads, const gc_attention_options *given) {
    gc_attention_options o = given ? *given : (gc_attention_options){0};
    if (heads <= 0 || dim <= 0 || (!o.head_dim && dim % heads != 0))
        gc_fatal("attention: dim %lld does not split into %d heads", (long long)dim, heads);
    if (!o.head_dim) o.head_dim = dim / heads;
    if (!o.kv_heads) o.kv_heads = heads;
    if (o.kv_heads < 0 || heads % o.kv_heads)
        gc_fatal("attention: %d heads do not split into %d key/value heads", heads, o.kv_heads);
    if (o.head_dim < 0 || (o.rope_theta > 0 && o.head_dim % 2) || o.rope_scale < 0 || o.qk_norm_eps < 0 || o.window < 0)
        gc_fatal("attention: head_dim %lld (even with rotary positions), rope_scale %g, qk_norm_eps %g and window %lld "
                 "must not be negative", (long long)o.head_dim, o.rope_scale, o.qk_norm_eps, (long long)o.window);
    return o;
}

gc_status gc_attention_init(gc_attention *layer, int64_t dim, int heads, double dropout,
                            const gc_attention_options *options, gc_dtype dtype, gc_device device, gc_generator *init) {
    gc_nn_check_dropout("attention", dropout);
    gc_attention_options o = resolved(dim, heads, options);
    *layer = (gc_attention){.heads = heads, .dropout = dropout, .options = o};
    int64_t queries = heads * o.head_dim, keys = o.kv_heads * o.head_dim;
    gc_status status = gc_linear_init(&layer->query, dim, queries, !o.no_qkv_bias, dtype, device, init);
    if (status == GC_OK) status = gc_linear_init(&layer->key, dim, keys, !o.no_qkv_bias, dtype, device, init);
    if (status == GC_OK) status = gc_linear_init(&layer->value, dim, keys, !o.no_qkv_bias, dtype, device, init);
    if (status == GC_OK) status = gc_linear_init(&layer->output, queries, dim, !o.no_output_bias, dtype, device, init);
    if (status == GC_OK && o.qk_norm_eps > 0)
        status = gc_rmsnorm_layer_init(&layer->query_norm, o.head_dim, o.qk_norm_eps, dtype, device);
    if (status == GC_OK && o.qk_norm_eps > 0)
        status = gc_rmsnorm_layer_init(&layer->key_norm, o.head_dim, o.qk_norm_eps, dtype, device);
    if (status != GC_OK) gc_attention_free(layer);
    return status;
}

/* x [B, T, dim] (or the packed real tokens [N, dim], `packing` given) -> [B, n, T, Dh]: the
 * projection to n heads (of the real tokens alone when packed, then padded), each head's
 * queries or keys normalised (`norm`, when it has a weight) and rotated (`rotary`, or NULL)
 * as transformers does, on [B, T, n, Dh], then the heads brought before the positions. */
static gc_tensor *project_heads(const gc_linear *projection, const gc_layernorm_layer *norm, const gc_tensor *rotary,
                                const gc_tensor *x, const gc_token_packing *packing, int64_t batch, int64_t length,
                                int n, int64_t head_dim, bool training) {
    gc_tensor *y = gc_linear_forward_with(projection, x, training, packing);
    if (packing) y = gc_nn_then(y, gc_tokens_unpack(y, packing));
    y = gc_nn_then(y, gc_reshape(y, GC_SHAPE(batch, length, n, head_dim)));
    if (norm && norm->gamma) y = gc_nn_then(y, gc_layernorm_layer_forward(norm, y));
    if (rotary) y = gc_nn_then(y, gc_rope(y, rotary));
    return gc_nn_then(y, gc_permute(y, (const int[]){0, 2, 1, 3}));
}

/* What scores q k^T are multiplied by: 1 / sqrt(Dh), one expression for every path, so that
 * they scale alike to the bit. */
static double attention_scale(int64_t head_dim) { return 1 / sqrt((double)head_dim); }

/* softmax(scores / sqrt(Dh) + bias) of scores [B * kv_heads, G * T, T] (= [B, H, T, T]), the
 * bias [B or 1, 1, T or 1, T] (or NULL) broadcast over the heads: one pass over the scores
 * (gc_softmax_scaled) where a scale, an add and a softmax would make three. */
static gc_tensor *attention_probs(const gc_tensor *scores, const gc_tensor *bias, int64_t batch, int heads,
                                  int64_t length, int64_t head_dim) {
    if (!scores) return NULL;
    gc_tensor *per_head = gc_reshape(scores, GC_SHAPE(batch, heads, length, length));
    gc_tensor *probs = gc_softmax_scaled(per_head, attention_scale(head_dim), bias);
    gc_tensor_release(per_head);
    return gc_nn_then(probs, gc_reshape(probs, scores->ndim, scores->shape));
}

/* The composed path's probabilities, after dropout, [B * kv_heads, G * T, T] (= [B, H, T, T])
 * of query [B, H, T, Dh] and key [B, kv_heads, T, Dh]: the scores of one batched matmul (the G
 * query heads of a key head are [B * kv_heads, G * T, Dh] as they lie), their masked softmax
 * and dropout. Takes over query's and key's references, freed after the product: the
 * softmax's peak holds the scores and the probabilities, not them. */
static gc_tensor *composed_probs(const gc_attention *layer, gc_tensor *query, gc_tensor *key, const gc_tensor *bias,
                                 bool training) {
    const gc_attention_options *o = &layer->options;
    int heads = layer->heads, groups = heads / o->kv_heads;
    int64_t batch = query->shape[0], length = query->shape[2], head_dim = o->head_dim;
    gc_tensor *grouped = gc_reshape(query, GC_SHAPE(batch * o->kv_heads, groups * length, head_dim));
    gc_tensor *keys = gc_reshape(key, GC_SHAPE(batch * o->kv_heads, length, head_dim));
    gc_tensor_release(query);
    gc_tensor_release(key);
    gc_tensor *scores = gc_matmul(grouped, keys, false, true); /* [B * kv_heads, G * T, T] */
    gc_tensor_release(grouped);
    gc_tensor_release(keys);
    gc_tensor *probs = gc_nn_then(scores, attention_probs(scores, bias, batch, heads, length, head_dim));
    return gc_nn_then(probs, gc_nn_dropout(probs, layer->dropout, training));
}

/* The context [B, H, T, Dh] of those probabilities and value [B, kv_heads, T, Dh]. */
static gc_tensor *composed_context(const gc_attention *layer, const gc_tensor *probs, const gc_tensor *value) {
    int64_t batch = value->shape[0], length = value->shape[2], head_dim = layer->options.head_dim;
    gc_tensor *values = gc_reshape(value, GC_SHAPE(batch * layer->options.kv_heads, length, head_dim));
    gc_tensor *context = gc_matmul(probs, values, false, false); /* [B * kv_heads, G * T, Dh] */
    gc_tensor_release(values);
    return gc_nn_then(context, gc_reshape(context, GC_SHAPE(batch, layer->heads, length, head_dim)));
}

/* The same context by gc_attention_fused, tile by tile: the causal mask and the window are the
 * op's own (the bias holds the padding alone: gc_attention_inputs), and dropout takes the words of the
 * default generator that gc_nn_dropout takes for the [B, H, T, T] probabilities, so both
 * paths draw the same mask. */
static gc_tensor *fused_context(const gc_attention *layer, const gc_tensor *query, const gc_tensor *key,
                                const gc_tensor *value, const gc_tensor *bias, bool training) {
    gc_attention_fused_options options = {.scale = attention_scale(layer->options.head_dim),
                                          .causal = layer->options.causal, .window = layer->options.window};
    if (training && layer->dropout > 0) {
        gc_generator *generator = gc_default_generator(query->device);
        int64_t length = query->shape[2];
        options.dropout = layer->dropout;
        options.seed = generator->seed;
        options.offset = gc_generator_take(generator, (uint64_t)(gc_numel(query) / query->shape[3] * length));
    }
    return gc_attention_fused(query, key, value, bias, &options);
}

/* Whether the context comes from gc_attention_packed: only padding hidden (no causal mask,
 * window, rotary positions or per-head norm), an inference forward (a training one without a
 * graph, GradCache's first pass, must give the bits of its replay, which records one and
 * composes), no graph (the op has no backward), and a kernel for x. It computes what the
 * composed ops below compute on the own GEMM, bit for bit, without unpacking packed q, k and
 * v, permuting them to heads, and permuting and packing the context back. Unpacked x
 * [B, T, dim] (nothing padded, or no packing) takes it too, every place a row, so that a
 * text's vector has the same bits alone as in a padded batch (the composed products of long
 * texts go to the BLAS, whose sums group otherwise). */
static bool packed_kernel_applies(const gc_attention *layer, const gc_tensor *x, const gc_attention_inputs *inputs,
                                  bool training) {
    const gc_attention_options *o = &layer->options;
    return !inputs->fused && !training && !inputs->rotary && !layer->query_norm.gamma &&
           !layer->key_norm.gamma && !o->causal && o->window == 0 && gc_attention_packed_available(x) &&
           !gc_linear_records(&layer->query, x) && !gc_linear_records(&layer->key, x) &&
           !gc_linear_records(&layer->value, x);
}

/* t [..., width] as rows [numel / width, width]. Takes t's reference. */
static gc_tensor *as_rows(gc_tensor *t) {
    if (!t) return NULL;
    int64_t width = t->shape[t->ndim - 1];
    return gc_nn_then(t, gc_reshape(t, GC_SHAPE(gc_numel(t) / width, width)));
}

/* The context of x by gc_attention_packed: [N, H * Dh] for packed x [N, dim], [B, T, H * Dh]
 * for x [B, T, dim]. */
static gc_tensor *packed_context(const gc_attention *layer, const gc_tensor *x, const gc_attention_inputs *inputs,
                                 int64_t batch, int64_t length) {
    const gc_token_packing *packing = inputs->packing;
    const gc_attention_options *o = &layer->options;
    gc_tensor *query = as_rows(gc_linear_forward_with(&layer->query, x, false, packing));
    gc_tensor *key = as_rows(gc_linear_forward_with(&layer->key, x, false, packing));
    gc_tensor *value = as_rows(gc_linear_forward_with(&layer->value, x, false, packing));
    gc_attention_packed_shape shape = {.batch = batch, .length = length, .heads = layer->heads,
                                       .kv_heads = o->kv_heads, .head_dim = o->head_dim,
                                       .scale = attention_scale(o->head_dim)};
    gc_tensor *context = gc_attention_packed(query, key, value, packing ? packing->positions : NULL, inputs->bias,
                                             &shape);
    gc_tensor_release(query);
    gc_tensor_release(key);
    gc_tensor_release(value);
    if (packing || !context) return context;
    return gc_nn_then(context, gc_reshape(context, GC_SHAPE(batch, length, layer->heads * o->head_dim)));
}

/* x [B, T, dim], or the packing's [N, dim]. */
static void check_inputs(const gc_attention *layer, const gc_tensor *x, const gc_tensor *mask,
                         const gc_token_packing *packing) {
    char x_text[128];
    int64_t dim = layer->query.weight->shape[1];
    if (packing ? x->ndim != 2 || x->shape[0] != packing->tokens || x->shape[1] != dim
                : x->ndim != 3 || x->shape[2] != dim)
        gc_fatal("attention: x %s is not [%s, %lld]", gc_tensor_str(x, x_text, sizeof x_text),
                 packing ? "N (the real tokens)" : "B, T", (long long)dim);
    int64_t batch = packing ? packing->batch : x->shape[0], length = packing ? packing->length : x->shape[1];
    gc_nn_check_mask("attention", mask, batch, length, x->dtype, x->device);
}

gc_tensor *gc_attention_forward_with(const gc_attention *layer, const gc_tensor *x /* [B, T, dim] or [N, dim] */,
                                     const gc_attention_inputs *inputs, bool training) {
    if (!x) return NULL;
    const gc_token_packing *packing = inputs->packing;
    check_inputs(layer, x, inputs->mask, packing);
    const gc_attention_options *o = &layer->options;
    int heads = layer->heads;
    int64_t batch = packing ? packing->batch : x->shape[0], length = packing ? packing->length : x->shape[1];
    int64_t head_dim = o->head_dim;
    if (packed_kernel_applies(layer, x, inputs, training)) {
        gc_tensor *context = packed_context(layer, x, inputs, batch, length);
        return gc_nn_then(context, gc_linear_forward_with(&layer->output, context, training, packing));
    }
    gc_tensor *query = project_heads(&layer->query, &layer->query_norm, inputs->rotary, x, packing, batch, length,
                                     heads, head_dim, training);
    gc_tensor *key = project_heads(&layer->key, &layer->key_norm, inputs->rotary, x, packing, batch, length,
                                   o->kv_heads, head_dim, training);
    /* composed, the queries, keys and scores are freed before the values are projected: the
     * layer's peak holds the probabilities and little else */
    gc_tensor *probs = NULL;
    if (!inputs->fused) {
        if (query && key) probs = composed_probs(layer, query, key, inputs->bias, training);
        else gc_tensor_release(query), gc_tensor_release(key);
        query = key = NULL;
    }
    gc_tensor *value = project_heads(&layer->value, NULL, NULL, x, packing, batch, length, o->kv_heads, head_dim,
                                     training);
    gc_tensor *context = NULL; /* [B, H, T, Dh] */
    if (value && (inputs->fused ? query && key : probs != NULL))
        context = inputs->fused ? fused_context(layer, query, key, value, inputs->bias, training)
                                : composed_context(layer, probs, value);
    gc_tensor_release(query);
    gc_tensor_release(key);
    gc_tensor_release(probs);
    gc_tensor_release(value);
    context = gc_nn_then(context, gc_permute(context, (const int[]){0, 2, 1, 3})); /* [B, T, H, Dh] */
    context = gc_nn_then(context, gc_reshape(context, GC_SHAPE(batch, length, heads * head_dim)));
    if (packing) context = gc_nn_then(context, gc_tokens_pack(context, packing)); /* [N, H * Dh] */
    return gc_nn_then(context, gc_linear_forward_with(&layer->output, context, training, packing));
}

gc_tensor *gc_attention_forward(const gc_attention *layer, const gc_tensor *x /* [B, T, dim] */,
                                const gc_tensor *mask /* [B, T] or NULL */, bool training) {
    if (!x) return NULL;
    check_inputs(layer, x, mask, NULL);
    gc_attention_inputs inputs;
    if (gc_attention_inputs_make(layer, x, mask, &inputs) != GC_OK) return NULL;
    gc_tensor *y = gc_attention_forward_with(layer, x, &inputs, training);
    gc_attention_inputs_free(&inputs);
    return y;
}

void gc_attention_params(const gc_attention *layer, const char *prefix, gc_param_list *list) {
    char name[GC_PARAM_NAME_MAX];
    const gc_linear *projections[4] = PROJECTIONS(layer);
    for (int i = 0; i < 4; i++) gc_linear_params(projections[i], gc_nn_join(name, prefix, projection_names[i]), list);
    if (layer->query_norm.gamma) gc_layernorm_layer_params(&layer->query_norm, gc_nn_join(name, prefix, "query_norm"), list);
    if (layer->key_norm.gamma) gc_layernorm_layer_params(&layer->key_norm, gc_nn_join(name, prefix, "key_norm"), list);
}

void gc_attention_free(gc_attention *layer) {
    gc_linear *projections[4] = PROJECTIONS(layer);
    for (int i = 0; i < 4; i++) gc_linear_free(projections[i]);
    gc_layernorm_layer_free(&layer->query_norm);
    gc_layernorm_layer_free(&layer->key_norm);
}
