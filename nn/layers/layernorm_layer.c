/* LayerNorm over the last dim with a learned scale (gamma) and shift (beta), or RMSNorm with a
 * scale only (the decoder family's). */
#include "layer_util.h"

gc_status gc_layernorm_layer_init(gc_layernorm_layer *layer, int64_t dim, double eps, gc_dtype dtype,
                                  gc_device device) {
    gc_nn_check_sizes("layernorm_layer", dim, 1, dtype);
    if (!(eps > 0)) gc_fatal("layernorm_layer: eps %g must be positive", eps);
    *layer = (gc_layernorm_layer){.eps = eps};
    layer->gamma = gc_nn_parameter(gc_ones(GC_SHAPE(dim), dtype, device));
    layer->beta = gc_nn_parameter(gc_zeros(GC_SHAPE(dim), dtype, device));
    if (!layer->gamma || !layer->beta) {
        gc_layernorm_layer_free(layer);
        return gc_last_status();
    }
    return GC_OK;
}

gc_status gc_rmsnorm_layer_init(gc_layernorm_layer *layer, int64_t dim, double eps, gc_dtype dtype,
                                gc_device device) {
    gc_nn_check_sizes("rmsnorm_layer", dim, 1, dtype);
    if (!(eps > 0)) gc_fatal("rmsnorm_layer: eps %g must be positive", eps);
    *layer = (gc_layernorm_layer){.eps = eps, .rms = true};
    layer->gamma = gc_nn_parameter(gc_ones(GC_SHAPE(dim), dtype, device));
    return layer->gamma ? GC_OK : gc_last_status();
}

gc_tensor *gc_layernorm_layer_forward(const gc_layernorm_layer *layer, const gc_tensor *x /* [..., dim] */) {
    if (layer->rms) return gc_rmsnorm(x, layer->gamma, layer->eps);
    return gc_layernorm(x, layer->gamma, layer->beta, layer->eps, NULL, NULL);
}

/* PyTorch's names, weight and bias, so that checkpoints map one to one. */
void gc_layernorm_layer_params(const gc_layernorm_layer *layer, const char *prefix, gc_param_list *list) {
    gc_param_list_add(list, prefix, "weight", layer->gamma, true);
    if (layer->beta) gc_param_list_add(list, prefix, "bias", layer->beta, true);
}

void gc_layernorm_layer_free(gc_layernorm_layer *layer) {
    gc_tensor_release(layer->gamma);
    gc_tensor_release(layer->beta);
    *layer = (gc_layernorm_layer){0};
}
