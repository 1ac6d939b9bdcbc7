/* What every attention layer of one forward shares, made once per forward from the mask and
 * the sequence length: the additive bias that hides keys (padding; later tokens when causal;
 * those outside a sliding window)
 * and the rotary table. A text encoder makes it once for all its layers; a lone layer's
 * forward makes its own. */
#include <stdlib.h>

#include "layer_util.h"
#include "tensor/attention_impl.h"

/* (mask [B, T] - 1) 10000 as [B, 1, 1, T]: broadcast over heads and queries; -10000
 * (GC_ATTENTION_HIDDEN) on padding, as the fused op hides its keys. */
static gc_tensor *padding_bias(const gc_tensor *mask) {
    gc_tensor *bias = gc_sub_scalar(mask, 1);
    bias = gc_nn_then(bias, gc_mul_scalar(bias, -GC_ATTENTION_HIDDEN));
    return gc_nn_then(bias, gc_reshape(bias, GC_SHAPE(mask->shape[0], 1, 1, mask->shape[1])));
}

/* [1, 1, T, T]: -10000 (GC_ATTENTION_HIDDEN) on every key the causal mask or the sliding window
 * hides from a query, 0 elsewhere, by the predicate the fused op applies itself
 * (gc_attention_hidden), so that both paths hide the same keys; made on the host (T^2 values,
 * below a layer's scores by a factor of the batch times the heads). */
static gc_tensor *hiding_bias(int64_t length, bool causal, int64_t window, gc_dtype dtype, gc_device device) {
    float *host = malloc((size_t)(length * length) * sizeof *host);
    if (!host) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "attention: no host memory for a causal or window mask of %lld tokens",
                     (long long)length);
        return NULL;
    }
    for (int64_t query = 0; query < length; query++)
        for (int64_t key = 0; key < length; key++)
            host[query * length + key] = gc_attention_hidden(query, key, causal, window) ? (float)GC_ATTENTION_HIDDEN : 0.0f;
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
    bool hiding_wanted = (o->causal || o->window > 0) && !inputs->fused; /* fused: the op's own */
    gc_status status = GC_OK;
    if (mask || hiding_wanted) {
        gc_tensor *padding = mask ? padding_bias(mask) : NULL;
        gc_tensor *hiding = hiding_wanted ? hiding_bias(length, o->causal, o->window, x->dtype, x->device) : NULL;
        if ((!mask || padding) && (!hiding_wanted || hiding))
            inputs->bias = padding && hiding ? gc_add(padding, hiding) : gc_tensor_retain(padding ? padding : hiding);
        gc_tensor_release(padding);
        gc_tensor_release(hiding);
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
