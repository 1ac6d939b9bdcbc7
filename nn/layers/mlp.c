/* The transformer's feed-forward block: Linear -> activation -> dropout -> Linear (BERT), or
 * gated: out(silu(gate x) * in x) with SwiGLU's fused product (Llama, Mistral, Qwen). */
#include "layer_util.h"

gc_status gc_mlp_init(gc_mlp *layer, int64_t dim, int64_t hidden, gc_activation activation, double dropout,
                      gc_dtype dtype, gc_device device, gc_generator *init) {
    gc_nn_check_dropout("mlp", dropout);
    *layer = (gc_mlp){.activation = activation, .dropout = dropout};
    gc_status status = gc_linear_init(&layer->in, dim, hidden, true, dtype, device, init);
    if (status == GC_OK) status = gc_linear_init(&layer->out, hidden, dim, true, dtype, device, init);
    if (status != GC_OK) gc_mlp_free(layer);
    return status;
}

gc_status gc_gated_mlp_init(gc_mlp *layer, int64_t dim, int64_t hidden, bool bias, gc_dtype dtype, gc_device device,
                            gc_generator *init) {
    *layer = (gc_mlp){0};
    gc_status status = gc_linear_init(&layer->gate, dim, hidden, bias, dtype, device, init);
    if (status == GC_OK) status = gc_linear_init(&layer->in, dim, hidden, bias, dtype, device, init);
    if (status == GC_OK) status = gc_linear_init(&layer->out, hidden, dim, bias, dtype, device, init);
    if (status != GC_OK) gc_mlp_free(layer);
    return status;
}

gc_tensor *gc_mlp_forward_with(const gc_mlp *layer, const gc_tensor *x /* [..., dim] */, bool training,
                               const gc_token_packing *packing) {
    gc_tensor *h = gc_linear_forward_with(&layer->in, x, training, packing); /* [..., hidden] */
    if (layer->gate.weight) {
        gc_tensor *gate = gc_linear_forward_with(&layer->gate, x, training, packing); /* [..., hidden] */
        gc_tensor *gated = gc_swiglu(gate, h);
        gc_tensor_release(gate);
        h = gc_nn_then(h, gated);
    } else {
        h = gc_nn_then(h, gc_activate(h, layer->activation));
    }
    h = gc_nn_then(h, gc_nn_dropout(h, layer->dropout, training));
    return gc_nn_then(h, gc_linear_forward_with(&layer->out, h, training, packing));
}

gc_tensor *gc_mlp_forward(const gc_mlp *layer, const gc_tensor *x /* [..., dim] */, bool training) {
    return gc_mlp_forward_with(layer, x, training, NULL);
}

void gc_mlp_params(const gc_mlp *layer, const char *prefix, gc_param_list *list) {
    char name[GC_PARAM_NAME_MAX];
    if (layer->gate.weight) gc_linear_params(&layer->gate, gc_nn_join(name, prefix, "gate"), list);
    gc_linear_params(&layer->in, gc_nn_join(name, prefix, "in"), list);
    gc_linear_params(&layer->out, gc_nn_join(name, prefix, "out"), list);
}

void gc_mlp_free(gc_mlp *layer) {
    gc_linear_free(&layer->gate);
    gc_linear_free(&layer->in);
    gc_linear_free(&layer->out);
}
