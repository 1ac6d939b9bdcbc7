/* Layers, built from ops (so autograd differentiates them with no backward of their own).
 *
 * The module convention: a layer is a struct holding its parameters (leaf tensors that
 * require gradients) and its settings, with
 *     gc_status gc_X_init(gc_X *layer, <sizes and settings>, gc_device, gc_generator *init);
 *     gc_tensor *gc_X_forward(const gc_X *layer, <inputs>, bool training);
 *     void gc_X_params(const gc_X *layer, const char *prefix, gc_param_list *list);
 *     void gc_X_free(gc_X *layer);
 * init draws its random initial values from `init` (a generator, see gradcache/rng.h), or
 * leaves the weights 0 when `init` is NULL (for a caller that loads every weight next, as
 * the pretrained loaders do: drawing 22M normals took most of a second), and returns GC_OK
 * or an allocation error (with nothing allocated left behind); params appends
 * the layer's parameters under dotted names ("layers.0.attention.query.weight"), which is
 * how optimizers, the gradient bucketer and checkpoints find them: there are no magic
 * parameter indices. forward follows the ops' conventions: a new reference, NULL on a
 * recoverable error or a NULL input.
 *
 * Initialisation is BERT's: weights of Linear and Embedding from normal(0, 0.02), biases
 * 0, LayerNorm gamma 1 and beta 0. Linear stores its weight [out, in] as PyTorch does, so
 * checkpoints map one to one. */
#ifndef GRADCACHE_NN_H
#define GRADCACHE_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/rng.h"
#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- named parameter lists --- */

#define GC_PARAM_NAME_MAX 128

typedef struct gc_param {
    char name[GC_PARAM_NAME_MAX];
    gc_tensor *tensor;  /* a reference held by the list */
    bool no_decay;      /* biases and norms: AdamW applies no weight decay to them */
} gc_param;

typedef struct gc_param_list {
    gc_param *items;
    int count, capacity;
} gc_param_list;

/* Appends prefix + "." + name (or name alone for an empty prefix); retains the tensor. */
void gc_param_list_add(gc_param_list *list, const char *prefix, const char *name, gc_tensor *tensor, bool no_decay);
/* The tensor named `name`, or NULL. */
gc_tensor *gc_param_list_find(const gc_param_list *list, const char *name);
/* Sum of the parameters' element counts. */
int64_t gc_param_list_numel(const gc_param_list *list);
/* Releases the list's references and its storage; the list is empty afterwards. */
void gc_param_list_free(gc_param_list *list);
/* Drops every parameter's gradient (gc_zero_grad on each). */
void gc_param_list_zero_grad(const gc_param_list *list);
/* Appends the parameters of `all` that learn (gc_requires_grad): with adapters attached, the
 * adapters alone, what an optimizer and a gradient reducer get. */
void gc_param_list_trainable(const gc_param_list *all, gc_param_list *trainable);

/* --- dropout (the default generator of x's device) ---
 * Identity (a new reference to x itself) when !training or p == 0. */
gc_tensor *gc_nn_dropout(const gc_tensor *x, double p, bool training);

/* --- activations --- */
typedef enum gc_activation { GC_ACT_GELU_ERF, GC_ACT_GELU_TANH, GC_ACT_RELU, GC_ACT_TANH } gc_activation;
gc_tensor *gc_activate(const gc_tensor *x, gc_activation activation);

/* --- LoRA: a low-rank adapter on a Linear, as PEFT's (nn/layers/lora.c) ---
 * The adapted Linear computes base(x) + (alpha / r) B A dropout(x): the base's weight and
 * bias frozen (no gradient), A and B the only parameters that learn. */
typedef struct gc_lora {
    gc_tensor *a;   /* "lora_A.weight": [r, in], PEFT's kaiming-uniform (a = sqrt 5): U(+-1/sqrt(in)) */
    gc_tensor *b;   /* "lora_B.weight": [out, r], zeros: the adapted layer starts as its base */
    double scale;   /* alpha / r */
    double dropout; /* on the adapter's input alone, drawn as gc_nn_dropout (so RNG replay repeats it) */
} gc_lora;

/* What an adapter is made of; targets name the Linears to adapt (see gc_lora_attach_targets). */
typedef struct gc_lora_config {
    int r;               /* the rank, > 0 */
    double alpha;        /* the scale is alpha / r */
    double dropout;      /* in [0, 1) */
    const char *targets; /* comma-separated module names, e.g. "query,key,value,dense" or "q_proj,v_proj" */
} gc_lora_config;

/* --- Linear: y = x W^T + b over the last dim --- */
typedef struct gc_linear {
    gc_tensor *weight; /* [out, in] */
    gc_tensor *bias;   /* [out], or NULL */
    gc_lora *lora;     /* NULL, or the adapter gc_lora_attach gave it (owned: gc_linear_free frees it) */
} gc_linear;
gc_status gc_linear_init(gc_linear *layer, int64_t in, int64_t out, bool bias, gc_dtype dtype, gc_device device,
                         gc_generator *init);
/* x [..., in] -> [..., out]; with an adapter, its update added without dropout (the layers of
 * a model pass their training flag to the adapter's dropout themselves). */
gc_tensor *gc_linear_forward(const gc_linear *layer, const gc_tensor *x);
/* "weight", "bias" and, with an adapter, "lora_A.weight" and "lora_B.weight" under prefix. */
void gc_linear_params(const gc_linear *layer, const char *prefix, gc_param_list *list);
void gc_linear_free(gc_linear *layer);

/* Gives `layer` an adapter of `config` (r, alpha, dropout; targets unused) on the base's
 * device, in the base's dtype or f32 over a 16-bit base (the base frozen as it is, the adapters
 * learning in f32, as PEFT's), A drawn from `init`'s stream (NULL: A left 0, for an adapter to be
 * loaded), and freezes the base's weight and bias. A second adapter, a bad r or dropout stop
 * the program; GC_OK or an allocation error (the layer then unchanged). */
gc_status gc_lora_attach(gc_linear *layer, const gc_lora_config *config, gc_generator *init);

/* --- Embedding: rows of a table --- */
typedef struct gc_embedding_layer {
    gc_tensor *weight; /* [vocab, dim] */
} gc_embedding_layer;
gc_status gc_embedding_layer_init(gc_embedding_layer *layer, int64_t vocab, int64_t dim, gc_dtype dtype,
                                  gc_device device, gc_generator *init);
/* ids i32 [S...] -> [S..., dim] */
gc_tensor *gc_embedding_layer_forward(const gc_embedding_layer *layer, const gc_tensor *ids);
void gc_embedding_layer_params(const gc_embedding_layer *layer, const char *prefix, gc_param_list *list);
void gc_embedding_layer_free(gc_embedding_layer *layer);

/* --- LayerNorm over the last dim, or RMSNorm (the decoder family's) --- */
typedef struct gc_layernorm_layer {
    gc_tensor *gamma; /* [dim], "weight" */
    gc_tensor *beta;  /* [dim], "bias"; NULL for RMSNorm */
    double eps;
    bool rms;         /* x / sqrt(mean(x^2) + eps) * gamma: no centring, no beta */
} gc_layernorm_layer;
gc_status gc_layernorm_layer_init(gc_layernorm_layer *layer, int64_t dim, double eps, gc_dtype dtype, gc_device device);
gc_status gc_rmsnorm_layer_init(gc_layernorm_layer *layer, int64_t dim, double eps, gc_dtype dtype, gc_device device);
gc_tensor *gc_layernorm_layer_forward(const gc_layernorm_layer *layer, const gc_tensor *x);
void gc_layernorm_layer_params(const gc_layernorm_layer *layer, const char *prefix, gc_param_list *list);
void gc_layernorm_layer_free(gc_layernorm_layer *layer);

/* --- MLP: Linear -> activation -> dropout -> Linear, or gated (SwiGLU) --- */
typedef struct gc_mlp {
    gc_linear gate; /* "gate": [hidden, dim], a gated MLP's only (transformers' gate_proj) */
    gc_linear in;   /* "in":   [hidden, dim] (a gated MLP's up_proj) */
    gc_linear out;  /* "out":  [dim, hidden] (down_proj) */
    gc_activation activation; /* unused by a gated MLP: its activation is SiLU */
    double dropout;
} gc_mlp;
gc_status gc_mlp_init(gc_mlp *layer, int64_t dim, int64_t hidden, gc_activation activation, double dropout,
                      gc_dtype dtype, gc_device device, gc_generator *init);
/* out(silu(gate x) * in x), as Llama, Mistral and Qwen compute it; `bias` on all three Linears. */
gc_status gc_gated_mlp_init(gc_mlp *layer, int64_t dim, int64_t hidden, bool bias, gc_dtype dtype, gc_device device,
                            gc_generator *init);
gc_tensor *gc_mlp_forward(const gc_mlp *layer, const gc_tensor *x, bool training);
void gc_mlp_params(const gc_mlp *layer, const char *prefix, gc_param_list *list);
void gc_mlp_free(gc_mlp *layer);

/* --- multi-head self-attention with a padding mask --- */
/* What the decoder family changes in attention; every field 0 gives BERT's. */
typedef struct gc_attention_options {
    int kv_heads;        /* key and value heads, dividing heads (grouped-query attention); 0: heads */
    int64_t head_dim;    /* 0: dim / heads */
    bool causal;         /* a token attends to itself and the tokens before it only */
    int64_t window;      /* > 0: a sliding window (Mistral's sliding_window): query q sees key k
                          * only when |q - k| < window (causal: q - window < k <= q); 0: none */
    double rope_theta;   /* > 0: rotary positions of this base on queries and keys (gc_rope) */
    double rope_scale;   /* linear scaling of the rotary positions (positions / scale); 0: 1 */
    double qk_norm_eps;  /* > 0: an RMSNorm over each head's queries and keys (Qwen3), this eps */
    bool no_qkv_bias;    /* the query, key and value projections have no bias (Llama, Qwen3) */
    bool no_output_bias; /* the output projection has none (Llama, Qwen2, Qwen3) */
} gc_attention_options;

typedef struct gc_attention {
    gc_linear query;         /* [heads * head_dim, dim] */
    gc_linear key, value;    /* [kv_heads * head_dim, dim] */
    gc_linear output;        /* [dim, heads * head_dim] */
    gc_layernorm_layer query_norm, key_norm; /* RMSNorm [head_dim]: "query_norm", "key_norm", with qk_norm_eps */
    int heads;
    double dropout; /* on the attention probabilities */
    gc_attention_options options; /* kv_heads and head_dim filled in */
} gc_attention;
/* options NULL: BERT's attention (every field 0). */
gc_status gc_attention_init(gc_attention *layer, int64_t dim, int heads, double dropout,
                            const gc_attention_options *options, gc_dtype dtype, gc_device device, gc_generator *init);
/* x [B, T, dim]; mask [B, T] of x's dtype, 1 for a real token and 0 for padding (or NULL:
 * no padding). A key the query may not see (padding; a later token when causal; one outside
 * the window) gets -10000
 * added to its score (as BERT), so its probability is 0 to the precision of any dtype.
 * -> [B, T, dim] */
gc_tensor *gc_attention_forward(const gc_attention *layer, const gc_tensor *x, const gc_tensor *mask, bool training);
void gc_attention_params(const gc_attention *layer, const char *prefix, gc_param_list *list);
void gc_attention_free(gc_attention *layer);

/* --- Transformer encoder layer --- */
typedef struct gc_text_encoder_config gc_text_encoder_config; /* below: the layer's sizes and choices */
typedef struct gc_encoder_layer {
    gc_attention attention;
    gc_layernorm_layer attention_norm;
    gc_mlp mlp;
    gc_layernorm_layer mlp_norm;
    double dropout;  /* on each sublayer's output before the residual add, and on the attention
                      * probabilities, as BERT; none inside the MLP (its dropout is 0) */
    bool pre_norm;   /* false: x = norm(x + f(x)) as in BERT; true: x = x + f(norm(x)) */
} gc_encoder_layer;
/* One layer of an encoder of `config` (its dim, heads, hidden, activation, dropout, pre_norm,
 * layernorm_eps, dtype and the decoder family's choices). */
gc_status gc_encoder_layer_init(gc_encoder_layer *layer, const gc_text_encoder_config *config, gc_device device,
                                gc_generator *init);
/* x [B, T, dim], mask [B, T] or NULL -> [B, T, dim] */
gc_tensor *gc_encoder_layer_forward(const gc_encoder_layer *layer, const gc_tensor *x, const gc_tensor *mask,
                                    bool training);
void gc_encoder_layer_params(const gc_encoder_layer *layer, const char *prefix, gc_param_list *list);
void gc_encoder_layer_free(gc_encoder_layer *layer);

/* --- pooling and normalisation of representations --- */
typedef enum gc_pooling { GC_POOL_CLS, GC_POOL_MEAN, GC_POOL_LAST } gc_pooling;
/* x [B, T, D], mask [B, T] (x's dtype, 1 = token) or NULL -> [B, D]: the first token's
 * vector (CLS), the mean over the tokens the mask keeps (MEAN), or the last token the mask
 * keeps (LAST, a decoder's embedding: with right padding the token before the padding, with
 * left padding position T - 1; the kept tokens of a row must be one run, as padding makes
 * them). A row whose mask keeps no token pools to 0 (MEAN divides by max(count, 1)). */
gc_tensor *gc_pool(const gc_tensor *x, const gc_tensor *mask, gc_pooling pooling);
/* x / sqrt(||x||^2 + eps^2) over the last dim (there is no max op): within a relative
 * eps^2 / (2 ||x||^2) of x / max(||x||, eps) for ||x|| >> eps (1e-12 / 2 for eps = 1e-6 and a
 * unit-size vector), and x / eps to the same order for ||x|| << eps; the two differ most, by a
 * factor sqrt 2, at ||x|| = eps. eps^2 must be representable in x's dtype (in f16, eps >= 2^-12)
 * for a zero vector to stay 0. */
gc_tensor *gc_l2_normalize(const gc_tensor *x, double eps);

/* --- a text encoder: tokens -> embeddings + positions -> N layers -> pooling -> projection --- */
struct gc_text_encoder_config {
    int64_t vocab;      /* token ids in [0, vocab) */
    int64_t max_length; /* learned positions */
    int64_t type_vocab; /* token types (BERT's segments), 0 for none; every token is of type 0 */
    int64_t dim;
    int heads;
    int layers;
    int64_t hidden;     /* the MLP's inner width */
    int64_t projection; /* 0: none; else a final Linear [projection, dim] with a bias */
    double dropout;
    bool pre_norm;
    gc_activation activation;
    gc_pooling pooling;
    bool normalize;       /* L2-normalise the output (eps 1e-12), as sentence-transformers' Normalize */
    double layernorm_eps; /* every LayerNorm's (or RMSNorm's) eps; 0 for BERT's 1e-12 */
    gc_dtype dtype;
    /* The decoder family (Llama, Mistral, Qwen2, Qwen3: gradcache/pretrained.h); each 0 is
     * BERT's choice. Rotary positions (attention.rope_theta > 0) replace the learned table. */
    gc_attention_options attention; /* kv heads, head_dim, causal, rotary positions, q/k norms, biases */
    bool rms_norm;                  /* every norm an RMSNorm (weight only) */
    bool gated_mlp;                 /* SwiGLU MLPs; `activation` unused */
    bool no_mlp_bias;               /* the gated MLPs' Linears have no bias */
};

typedef struct gc_text_encoder {
    gc_text_encoder_config config;
    gc_embedding_layer tokens;     /* "embeddings.tokens" */
    gc_embedding_layer positions;  /* "embeddings.positions": learned positions only */
    gc_embedding_layer token_types; /* "embeddings.token_types": when config.type_vocab > 0 */
    gc_layernorm_layer embedding_norm; /* "embeddings.norm": post-norm encoders only (BERT) */
    gc_encoder_layer *layers;      /* [config.layers], "layers.N" */
    gc_layernorm_layer final_norm; /* "final_norm": pre-norm encoders only */
    gc_linear projection;          /* "projection": when config.projection > 0 */
    /* Not part of the model: when set, each layer keeps only its input for backward and is
     * recomputed there (gc_checkpoint, gradcache/autograd.h), so that a forward with a graph
     * holds one layer's intermediates at a time instead of all of them; the same values and
     * gradients, at the cost of a second forward of every layer in backward. */
    bool checkpoint_layers;
} gc_text_encoder;

gc_status gc_text_encoder_init(gc_text_encoder *encoder, const gc_text_encoder_config *config, gc_device device,
                               gc_generator *init);
/* The number of parameters gc_text_encoder_init creates for `config`, computed without
 * building anything: what a file must hold before a model it describes is allocated. */
int64_t gc_text_encoder_numel(const gc_text_encoder_config *config);
/* ids i32 [B, T] (1 <= T <= max_length), mask [B, T] of the encoder's dtype or NULL ->
 * [B, projection or dim]. Token type 0 (when there are types) and learned positions 0..T-1
 * are added to the tokens (rotary positions are the attention's); then the embedding norm (post-norm), dropout, the layers (each given the
 * mask), the final norm (pre-norm), the pooling (given the mask), the projection and the
 * normalisation. Padding is skipped in all but attention's core when the mask is read on the
 * host (always in inference; in training when it is in host memory): the output is the
 * padded computation's bit for bit, and the gradients are too, up to the grouping of the sums
 * over rows, from which the padding's exact zeros are left out. */
gc_tensor *gc_text_encoder_forward(const gc_text_encoder *encoder, const gc_tensor *ids, const gc_tensor *mask,
                                   bool training);
/* The forward up to the pooling: every token's vector [B, T, dim] after the last layer (and the
 * final norm of a pre-norm encoder), as transformers' last_hidden_state. */
gc_tensor *gc_text_encoder_hidden(const gc_text_encoder *encoder, const gc_tensor *ids, const gc_tensor *mask,
                                  bool training);
void gc_text_encoder_params(const gc_text_encoder *encoder, const char *prefix, gc_param_list *list);
void gc_text_encoder_free(gc_text_encoder *encoder);

/* Folds the adapter into the base, W += (alpha / r) B A (in W's dtype), and removes it, as
 * PEFT's merge_and_unload: the Linear then computes the adapted function alone (without
 * dropout) and saves as a plain Linear. Its parameters stay frozen. GC_OK (nothing to do
 * without an adapter) or an allocation error, the layer then unchanged. */
gc_status gc_lora_merge(gc_linear *layer);
/* gc_lora_merge on every Linear of `encoder`. */
gc_status gc_lora_merge_all(gc_text_encoder *encoder);

/* Freezes every parameter of `encoder`, then attaches an adapter to each of its Linears whose
 * module name matches a target as PEFT matches: the name equals the target or ends in
 * "." + target. The names are Hugging Face's for an encoder with a pretrained layout
 * ("encoder.layer.0.attention.self.query", "layers.0.self_attn.q_proj") and gradcache's
 * otherwise ("layers.0.attention.query", "projection"). *attached (may be NULL) receives the
 * number of adapted Linears; a target that matches none is GC_ERR_CONFIG naming
 * it, as are an empty list, r <= 0 and a dropout outside [0, 1) (they come from flags
 * and files). */
gc_status gc_lora_attach_targets(gc_text_encoder *encoder, const gc_lora_config *config, gc_generator *init,
                                 int *attached);

#ifdef __cplusplus
}
#endif
#endif
