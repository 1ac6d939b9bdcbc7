/* What the layers share: BERT-style parameter creation, nested parameter names, and the
 * release-as-you-go chaining of ops. */
#ifndef GC_NN_LAYER_UTIL_H
#define GC_NN_LAYER_UTIL_H

#include <stdio.h>

#include "gradcache/autograd.h"
#include "gradcache/nn.h"
#include "gradcache/ops.h"
#include "gradcache/random.h"

/* The LayerNorm eps of the encoder's norms: BERT's layer_norm_eps, so that its checkpoints
 * compute the same function here. */
#define GC_NN_LAYERNORM_EPS 1e-12

/* A layer's sizes and dtype are programmer choices: anything else than positive sizes and a
 * floating dtype stops the program naming the layer. */
static inline void gc_nn_check_sizes(const char *layer, int64_t first, int64_t second, gc_dtype dtype) {
    if (first <= 0 || second <= 0 || !gc_dtype_is_float(dtype))
        gc_fatal("%s: needs positive sizes and a floating dtype, got %lld, %lld and %s", layer, (long long)first,
                 (long long)second, gc_dtype_name(dtype));
}

/* Dropout probabilities live in [0, 1): p = 1 would divide by 0. */
static inline void gc_nn_check_dropout(const char *layer, double p) {
    if (!(p >= 0 && p < 1)) gc_fatal("%s: dropout %g is outside [0, 1)", layer, p);
}

/* A padding mask must be [batch, length] of the activations' dtype (it is added to scores and
 * multiplied into vectors) and on their device; NULL (no padding) passes. */
static inline void gc_nn_check_mask(const char *layer, const gc_tensor *mask, int64_t batch, int64_t length,
                                    gc_dtype dtype, gc_device device) {
    if (mask && (mask->ndim != 2 || mask->shape[0] != batch || mask->shape[1] != length || mask->dtype != dtype ||
                 !gc_device_equal(mask->device, device))) {
        char mask_text[128], device_text[32];
        gc_fatal("%s: mask %s is not [%lld, %lld] %s %s", layer, gc_tensor_str(mask, mask_text, sizeof mask_text),
                 (long long)batch, (long long)length, gc_dtype_name(dtype),
                 gc_device_str(device, device_text, sizeof device_text));
    }
}

/* Makes a fresh tensor a parameter (a leaf that requires a gradient); NULL stays NULL. */
static inline gc_tensor *gc_nn_parameter(gc_tensor *t) {
    if (t) gc_set_requires_grad(t, true);
    return t;
}

/* A parameter drawn from normal(0, 0.02), BERT's initialiser, out of `init`'s stream; init
 * advances past the words drawn, so the next parameter gets fresh numbers. */
static inline gc_tensor *gc_nn_normal_parameter(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device,
                                                gc_generator *init) {
    if (!init) return gc_nn_parameter(gc_zeros(ndim, shape, dtype, device)); /* to be loaded: no draws */
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    uint64_t offset = gc_generator_take(init, gc_normal_words(numel));
    return gc_nn_parameter(gc_normal(ndim, shape, dtype, device, 0.0, 0.02, init->seed, offset));
}

/* prefix + "." + name (name alone for an empty prefix) into name_out, the prefix a layer
 * hands to its sublayers' params functions. */
static inline const char *gc_nn_join(char name_out[GC_PARAM_NAME_MAX], const char *prefix, const char *name) {
    int length = snprintf(name_out, GC_PARAM_NAME_MAX, "%s%s%s", prefix ? prefix : "", prefix && *prefix ? "." : "",
                          name);
    if (length >= GC_PARAM_NAME_MAX)
        gc_fatal("params: name '%s.%s' is longer than %d characters", prefix, name, GC_PARAM_NAME_MAX - 1);
    return name_out;
}

/* The real tokens of a padded batch, packed (token_packing.c): the text encoder's forward
 * (inference, and training with a graph or without when the mask is in host memory) keeps
 * its hidden states as [N, dim], the N real tokens of [B, T, dim] in order, so that the
 * token-by-token work (every linear, the MLP, the norms, dropout) skips the padding; only
 * attention's core, which mixes the tokens of a sequence (scores, softmax, context), sees
 * them padded. */
typedef struct gc_token_packing {
    int64_t batch, length, tokens; /* B, T, N */
    gc_tensor *positions;          /* i32 [N]: b * T + t of each real token */
    gc_tensor *rows;               /* i32 [B * T]: the packed row of each position, N for padding */
} gc_token_packing;

/* The packing of `mask` [B, T] (1 real, 0 padding: read on the host); false with *packing
 * untouched when there is no padding to skip, or when an allocation failed (gc_last_status). */
bool gc_token_packing_make(const gc_tensor *mask, gc_token_packing *packing);
void gc_token_packing_free(gc_token_packing *packing);
/* x [B, T, dim] -> [N, dim]: the real tokens' rows. */
gc_tensor *gc_tokens_pack(const gc_tensor *x, const gc_token_packing *packing);
/* x [N, dim] -> [B, T, dim]: the rows back in place, padding rows 0. */
gc_tensor *gc_tokens_unpack(const gc_tensor *x, const gc_token_packing *packing);
/* gc_nn_dropout of x [N, dim] packed by `packing` (or of x as it is, when packing is NULL):
 * the masks, and the generator's advance, of the padded [B, T, dim]'s dropout, so that a
 * packed forward in training draws what the padded one draws (GradCache's replay of a
 * chunk, and a checkpointed layer's recompute, rely on it). */
gc_tensor *gc_tokens_dropout(const gc_tensor *x, double p, bool training, const gc_token_packing *packing);

/* gc_linear_forward with the adapter's dropout on when training; x [N, in] packed by
 * `packing` (or x [..., in] as it is, packing NULL) draws the padded batch's masks. */
gc_tensor *gc_linear_forward_with(const gc_linear *layer, const gc_tensor *x, bool training,
                                  const gc_token_packing *packing);
/* Whether gc_linear_forward_with(layer, x, ...) records a graph: grad mode on and x, the
 * weight, the bias or an adapter's matrix needing a gradient. */
bool gc_linear_records(const gc_linear *layer, const gc_tensor *x);
/* gc_mlp_forward given the packing of x [N, dim] (or NULL), for its adapters' dropout. */
gc_tensor *gc_mlp_forward_with(const gc_mlp *layer, const gc_tensor *x, bool training,
                               const gc_token_packing *packing);
/* An adapted Linear's output (lora.c): y [n, out], its base's output for rows [n, in], plus
 * (alpha / r) B A dropout(rows), in y's dtype; rows packed by `packing` or NULL, as
 * gc_linear_forward_with. Takes y's reference (NULL flows through). */
gc_tensor *gc_lora_add(const gc_lora *lora, gc_tensor *y, const gc_tensor *rows, bool training,
                       const gc_token_packing *packing);
/* The adapters' dtype over a base of `base`: f32 over a 16-bit base, the base's otherwise. */
gc_dtype gc_lora_dtype(gc_dtype base);
void gc_lora_params(const gc_lora *lora, const char *prefix, gc_param_list *list);
void gc_lora_free(gc_lora *lora);

/* What the attention layers of one forward share (attention_inputs.c): made once by a text
 * encoder for all its layers. */
typedef struct gc_attention_inputs {
    const gc_tensor *mask; /* [B, T] or NULL: the padding mask, as given */
    /* whether the layers run fused (gc_fused_attention() when these were made): the fused op
     * hides the later tokens itself, so the bias then holds the padding alone */
    bool fused;
    gc_tensor *bias;       /* added to the scores [B, H, T, T]: [B, 1, 1, T] (padding), [1, 1, T, T]
                            * (causal) or [B, 1, T, T] (both); NULL when no key is hidden */
    gc_tensor *rotary;     /* [T, head_dim]: gc_rope_table, for rotary positions; else NULL */
    /* NULL, or the packing of the hidden states the layers get (x [N, dim]; attention unpacks) */
    const gc_token_packing *packing;
} gc_attention_inputs;

/* The inputs of `layer`'s attention over x [B, T, dim] with `mask`; an allocation error
 * leaves nothing allocated. */
gc_status gc_attention_inputs_make(const gc_attention *layer, const gc_tensor *x, const gc_tensor *mask,
                                   gc_attention_inputs *inputs);
void gc_attention_inputs_free(gc_attention_inputs *inputs);
/* gc_attention_forward and gc_encoder_layer_forward given the shared inputs. */
gc_tensor *gc_attention_forward_with(const gc_attention *layer, const gc_tensor *x, const gc_attention_inputs *inputs,
                                     bool training);
gc_tensor *gc_encoder_layer_forward_with(const gc_encoder_layer *layer, const gc_tensor *x,
                                         const gc_attention_inputs *inputs, bool training);
/* The same layer keeping only x and the shared inputs (the packing's indices included) for
 * backward, and recomputing the rest there (encoder_layer_checkpoint.c): the same values and
 * gradients, less memory. */
gc_tensor *gc_encoder_layer_forward_checkpointed(const gc_encoder_layer *layer, const gc_tensor *x,
                                                 const gc_attention_inputs *inputs, bool training);

/* Releases `used` and returns `result`, so that a chain of ops that each consume the last
 * intermediate reads top to bottom: h = gc_nn_then(h, gc_relu(h)). A NULL result (an
 * allocation failure) flows on through the NULL-tolerant ops to the chain's end. */
static inline gc_tensor *gc_nn_then(gc_tensor *used, gc_tensor *result) {
    gc_tensor_release(used);
    return result;
}

#endif
