/* A decoder-family folder's config.json (Llama, Mistral, Qwen2, Qwen3; the folder's other
 * files are pretrained_folder.c's): each field checked, and every choice gradcache does not
 * implement refused by name rather than approximated. Rotary positions are read from either
 * transformers' form: rope_theta and rope_scaling (version 4, most published models), or
 * rope_parameters (version 5, which writes both into one object). */
#include <string.h>

#include "nn/pretrained/pretrained_internal.h"

/* The rotary base and linear scaling factor, from `rope` (rope_scaling or rope_parameters: an
 * object, or null for none) and the top-level rope_theta. */
static gc_status read_rope(const char *path, const gc_json *config, const char *field, gc_attention_options *a) {
    const gc_json *rope = gc_json_member(config, field);
    gc_status status = gc_config_number(path, config, "rope_theta", 1.0000001, 1e15, 10000, &a->rope_theta);
    if (status != GC_OK || !rope || rope->type == GC_JSON_NULL) return status;
    if (rope->type != GC_JSON_OBJECT)
        return gc_json_file_error(path, "\"%s\" is %s, not an object", field, gc_json_type_name(rope->type));
    const char *key = gc_json_member(rope, "rope_type") ? "rope_type" : "type"; /* older files say "type" */
    const gc_json *kind = gc_json_member(rope, key);
    bool linear = kind && kind->type == GC_JSON_STRING && !strcmp(kind->string, "linear");
    if (kind && !linear && !(kind->type == GC_JSON_STRING && !strcmp(kind->string, "default")))
        return gc_json_file_error(path, "\"%s.%s\" is %s%.40s%s, a rotary scaling gradcache does not implement "
                                  "(\"default\" and \"linear\" are)", field, key, kind->type == GC_JSON_STRING ? "\"" : "",
                                  kind->type == GC_JSON_STRING ? kind->string : gc_json_type_name(kind->type),
                                  kind->type == GC_JSON_STRING ? "\"" : "");
    if (gc_json_member(rope, "rope_theta"))
        status = gc_config_number(path, rope, "rope_theta", 1.0000001, 1e15, 10000, &a->rope_theta);
    if (status == GC_OK && linear) status = gc_config_number(path, rope, "factor", 1e-3, 1e6, 0, &a->rope_scale);
    if (status == GC_OK && linear && !(a->rope_scale > 0))
        return gc_json_file_error(path, "\"%s.factor\" is missing: a linear scaling needs one", field);
    return status;
}

/* The sizes of the model, each field in range, heads and key/value heads that fit. */
static gc_status read_sizes(const char *path, const gc_json *config, gc_text_encoder_config *c) {
    int64_t heads = 1, layers = 1, kv_heads = 1, head_dim = 2;
    gc_status status = gc_config_size(path, config, "vocab_size", 1, INT32_MAX, &c->vocab);
    if (status == GC_OK) status = gc_config_size(path, config, "hidden_size", 1, GC_CONFIG_MAX_SIZE, &c->dim);
    if (status == GC_OK) status = gc_config_size(path, config, "intermediate_size", 1, GC_CONFIG_MAX_SIZE, &c->hidden);
    if (status == GC_OK) status = gc_config_size(path, config, "num_hidden_layers", 1, 1000, &layers);
    if (status == GC_OK) status = gc_config_size(path, config, "num_attention_heads", 1, 4096, &heads);
    if (status == GC_OK) status = gc_config_size_or(path, config, "num_key_value_heads", 1, heads, heads, &kv_heads);
    if (status == GC_OK && !gc_json_member(config, "head_dim") && c->dim % heads)
        return gc_json_file_error(path, "hidden_size %lld does not split into %lld heads (and there is no head_dim)",
                                  (long long)c->dim, (long long)heads);
    if (status == GC_OK)
        status = gc_config_size_or(path, config, "head_dim", 2, 65536, c->dim / heads, &head_dim);
    if (status == GC_OK)
        status = gc_config_size(path, config, "max_position_embeddings", 1, 1 << 24, &c->max_length);
    if (status != GC_OK) return status;
    if (heads % kv_heads)
        return gc_json_file_error(path, "num_attention_heads %lld does not split into num_key_value_heads %lld",
                                  (long long)heads, (long long)kv_heads);
    if (head_dim % 2)
        return gc_json_file_error(path, "head_dim %lld is odd: rotary positions pair a head's dimensions",
                                  (long long)head_dim);
    c->heads = (int)heads;
    c->layers = (int)layers;
    c->attention.kv_heads = (int)kv_heads;
    c->attention.head_dim = head_dim;
    return GC_OK;
}

/* Mistral's sliding_window (null or missing: none) on every layer, as attention's window
 * (gc_attention_options): token q attends key k when q - window < k <= q, the window keys up to
 * and including itself. That is transformers 4.51.3's definition
 * (MistralModel._prepare_4d_causal_attention_mask_with_cache_position hides the keys with
 * arange <= cache_position - sliding_window; later releases keep kv_idx > q_idx - sliding_window
 * in masking_utils.sliding_window_overlay). transformers 4.40.2's
 * AttentionMaskConverter._make_causal_mask (a tril at diagonal -sliding_window - 1) let a query
 * see one key more, window + 1: tests/make_decoder_fixture.py shows the two differ. Qwen2's
 * and Qwen3's use_sliding_window (windows on the layers from max_window_layers on) is refused
 * by name. */
static gc_status read_window(const char *path, const gc_json *config, bool mistral, gc_text_encoder_config *c) {
    bool used = mistral;
    gc_status status = mistral ? GC_OK : gc_config_flag(path, config, "use_sliding_window", false, &used);
    if (status == GC_OK && used && !mistral)
        return gc_json_file_error(path, "\"use_sliding_window\" is true: gradcache implements Mistral's sliding "
                                  "window on every layer, not this model_type's windows from max_window_layers on");
    if (status == GC_OK && used)
        status = gc_config_size_or(path, config, "sliding_window", 1, INT32_MAX, 0, &c->attention.window);
    return status;
}

gc_status gc_decoder_config_read(const char *path, const gc_json *config, gc_text_encoder_config *c) {
    static const char *const model_types[] = {"llama", "mistral", "qwen2", "qwen3", NULL};
    static const char *const activations[] = {"silu", NULL};
    enum { LLAMA, MISTRAL, QWEN2, QWEN3 };
    if (config->type != GC_JSON_OBJECT) return gc_json_file_error(path, "not a JSON object");
    int model_type = 0, activation = 0;
    bool attention_bias = false, mlp_bias = false, causal = true;
    double attention_dropout = 0;
    gc_status status = gc_config_choice(path, config, "model_type", model_types, -1, &model_type);
    if (status == GC_OK && model_type < 0) return gc_json_file_error(path, "no \"model_type\"");
    if (status == GC_OK) status = gc_config_choice(path, config, "hidden_act", activations, 0, &activation);
    if (status == GC_OK) status = read_sizes(path, config, c);
    if (status == GC_OK) status = gc_config_number(path, config, "rms_norm_eps", 1e-30, 1, 1e-6, &c->layernorm_eps);
    if (status == GC_OK)
        status = read_rope(path, config, gc_json_member(config, "rope_parameters") ? "rope_parameters" : "rope_scaling",
                           &c->attention);
    if (status == GC_OK) status = gc_config_flag(path, config, "attention_bias", false, &attention_bias);
    if (status == GC_OK) status = gc_config_flag(path, config, "mlp_bias", false, &mlp_bias);
    /* an embedder may read its text both ways (LLM2Vec, GritLM): "is_causal": false */
    if (status == GC_OK) status = gc_config_flag(path, config, "is_causal", true, &causal);
    if (status == GC_OK) status = gc_config_number(path, config, "attention_dropout", 0, 1, 0, &attention_dropout);
    if (status == GC_OK) status = read_window(path, config, model_type == MISTRAL, c);
    if (status != GC_OK) return status;
    if (attention_dropout != 0)
        return gc_json_file_error(path, "\"attention_dropout\" is %g: gradcache's decoders train without dropout",
                                  attention_dropout);
    c->pre_norm = c->rms_norm = c->gated_mlp = true;
    c->pooling = GC_POOL_LAST;
    c->attention.causal = causal;
    /* Qwen2 biases q, k and v always (its config has no field for it); the others as attention_bias says */
    c->attention.no_qkv_bias = model_type != QWEN2 && !attention_bias;
    c->attention.no_output_bias = model_type == QWEN2 || !attention_bias;
    c->no_mlp_bias = !mlp_bias;
    if (model_type == QWEN3) c->attention.qk_norm_eps = c->layernorm_eps;
    return GC_OK;
}
