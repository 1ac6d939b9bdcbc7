/* Linear: y = x W^T + b over the last dim, W stored [out, in] as PyTorch does, plus the
 * update of its LoRA adapter when it has one (lora.c). */
#include "layer_util.h"

gc_status gc_linear_init(gc_linear *layer, int64_t in, int64_t out, bool bias, gc_dtype dtype, gc_device device,
                         gc_generator *init) {
    gc_nn_check_sizes("linear", in, out, dtype);
    *layer = (gc_linear){0};
    layer->weight = gc_nn_normal_parameter(GC_SHAPE(out, in), dtype, device, init);
    /* multiplied by every batch, chunk and pass: worth keeping packed (gradcache/tensor.h) */
    if (layer->weight) gc_tensor_set_weight(layer->weight);
    if (bias) layer->bias = gc_nn_parameter(gc_zeros(GC_SHAPE(out), dtype, device));
    if (!layer->weight || (bias && !layer->bias)) {
        gc_linear_free(layer);
        return gc_last_status();
    }
    return GC_OK;
}

gc_tensor *gc_linear_forward_with(const gc_linear *layer, const gc_tensor *x /* [..., in] */, bool training,
                                  const gc_token_packing *packing) {
    if (!x) return NULL;
    int64_t out = layer->weight->shape[0], in = layer->weight->shape[1];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != in) {
        char x_text[128], w_text[128];
        gc_fatal("linear: x %s does not end in the %lld inputs of weight %s", gc_tensor_str(x, x_text, sizeof x_text),
                 (long long)in, gc_tensor_str(layer->weight, w_text, sizeof w_text));
    }
    /* matmul is 2-D: every leading dim folds into rows, and unfolds again at the end. */
    int64_t shape[GC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = out;
    gc_tensor *rows = gc_reshape(x, GC_SHAPE(gc_numel(x) / in, in));
    gc_tensor *y = layer->bias ? gc_matmul_bias(rows, layer->weight, layer->bias, false, true)
                               : gc_matmul(rows, layer->weight, false, true); /* [rows, out] */
    if (layer->lora) y = gc_lora_add(layer->lora, y, rows, training, packing);
    gc_tensor_release(rows);
    return gc_nn_then(y, gc_reshape(y, x->ndim, shape));
}

bool gc_linear_records(const gc_linear *layer, const gc_tensor *x) {
    const gc_lora *lora = layer->lora;
    return gc_grad_enabled() &&
           (gc_requires_grad(x) || gc_requires_grad(layer->weight) || (layer->bias && gc_requires_grad(layer->bias)) ||
            (lora && (gc_requires_grad(lora->a) || gc_requires_grad(lora->b))));
}

gc_tensor *gc_linear_forward(const gc_linear *layer, const gc_tensor *x /* [..., in] */) {
    return gc_linear_forward_with(layer, x, false, NULL);
}

void gc_linear_params(const gc_linear *layer, const char *prefix, gc_param_list *list) {
    gc_param_list_add(list, prefix, "weight", layer->weight, false);
    if (layer->bias) gc_param_list_add(list, prefix, "bias", layer->bias, true);
    if (layer->lora) gc_lora_params(layer->lora, prefix, list);
}

void gc_linear_free(gc_linear *layer) {
    gc_tensor_release(layer->weight);
    gc_tensor_release(layer->bias);
    gc_lora_free(layer->lora);
    *layer = (gc_linear){0};
}
