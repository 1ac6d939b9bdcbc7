/* What every attention layer of one forward shares, made once per forward from the mask and
 * the sequence length: the additive bias that hides keys (padding; later tokens when causal)
 * and the rotary table. A text encoder makes it once for all its layers; a lone layer's
 * forward makes its own. */
#include <stdlib.h>

#include "layer_util.h"

/* (mask [B, T] - 1) 10000 as [B, 1, 1, T]: broadcast over heads and queries. */
static gc_tensor *padding_bias(const gc_tensor *mask) {
    gc_tensor *bias = gc_sub_scalar(mask, 1);
    bias = gc_nn_then(bias, gc_mul_scalar(bias, 10000));
    return gc_nn_then(bias, gc_reshape(bias, GC_SHAPE(mask->shape[0], 1, 1, mask->shape[1])));
}

/* [1, 1, T, T]: -10000 where the key comes after the query, 0 elsewhere; made on the host
 * (T^2 values, below a layer's scores by a factor of the batch times the heads). */
static gc_tensor *causal_bias(int64_t length, gc_dtype dtype, gc_device device) {
    float *host = malloc((size_t)(length * length) * sizeof *host);
    if (!host) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "attention: no host memory for a causal mask of %lld tokens",
                     (long long)length);
        return NULL;
    }
    for (int64_t query = 0; query < length; query++)
        for (int64_t key = 0; key < length; key++) host[query * length + key] = key > query ? -10000.0f : 0.0f;
    gc_tensor *bias = gc_from_host(host, GC_SHAPE(1, 1, length, length), GC_F32, device);
    free(host);
    return dtype == GC_F32 ? bias : gc_nn_then(bias, gc_cast(bias, dtype));
}

gc_status gc_attention_inputs_make(const gc_attention *layer, const gc_tensor *x /* [B, T, dim] */,
                                   const gc_tensor *mask /* [B, T] or NULL */, gc_attention_inputs *inputs) {
    char x_text[128];
    if (x->ndim != 3) gc_fatal("attention: x %s is not [B, T, dim]", gc_tensor_str(x, x_text, sizeof x_text));
    gc_nn_check_mask("attention", mask, x->shape[0], x->shape[1], x->dtype, x->device);
    *inputs = (gc_attention_inputs){.mask = mask, .fused = gc_fused_attention()};
    const gc_attention_options *o = &layer->options;
    int64_t length = x->shape[1];
    bool causal_bias_wanted = o->causal && !inputs->fused;
    gc_status status = GC_OK;
    if (mask || causal_bias_wanted) {
        gc_tensor *padding = mask ? padding_bias(mask) : NULL;
        gc_tensor *causal = causal_bias_wanted ? causal_bias(length, x->dtype, x->device) : NULL;
        if ((!mask || padding) && (!causal_bias_wanted || causal))
            inputs->bias = padding && causal ? gc_add(padding, causal) : gc_tensor_retain(padding ? padding : causal);
        gc_tensor_release(padding);
        gc_tensor_release(causal);
        if (!inputs->bias) status = gc_last_status();
    }
    if (status == GC_OK && o->rope_theta > 0 &&
        !(inputs->rotary = gc_rope_table(length, o->head_dim, o->rope_theta, o->rope_scale > 0 ? o->rope_scale : 1,
                                         x->dtype, x->device)))
        status = gc_last_status();
    if (status != GC_OK) gc_attention_inputs_free(inputs);
    return status;
}

void gc_attention_inputs_free(gc_attention_inputs *inputs) {
    gc_tensor_release(inputs->bias);
    gc_tensor_release(inputs->rotary);
    *inputs = (gc_attention_inputs){0};
}
