/* LoRA (Hu et al. 2021) as PEFT computes it: an adapted Linear adds (alpha / r) B A dropout(x)
 * to its frozen base's output. Only A and B learn, so a step's gradients, optimizer state and
 * reductions are the adapters' alone. Over a 16-bit base the adapters are f32, as PEFT keeps
 * them (autocast_adapter_dtype): the frozen base needs no f32 master copy, and the adapters'
 * small updates are not lost to bf16's 8-bit mantissa. */
#include <math.h>
#include <stdlib.h>

#include "layer_util.h"

gc_status gc_lora_attach(gc_linear *layer, const gc_lora_config *config, gc_generator *init) {
    if (layer->lora) gc_fatal("lora_attach: the Linear [%lld, %lld] has an adapter already",
                              (long long)layer->weight->shape[0], (long long)layer->weight->shape[1]);
    gc_nn_check_sizes("lora_attach", config->r, layer->weight->shape[1], layer->weight->dtype);
    gc_nn_check_dropout("lora_attach", config->dropout);
    int64_t out = layer->weight->shape[0], in = layer->weight->shape[1];
    gc_dtype dtype = gc_lora_dtype(layer->weight->dtype);
    gc_device device = layer->weight->device;
    gc_lora *lora = calloc(1, sizeof *lora);
    if (!lora) gc_fatal("lora_attach: out of host memory");
    *lora = (gc_lora){.scale = config->alpha / config->r, .dropout = config->dropout};
    /* PEFT's kaiming_uniform_(A, a = sqrt 5): gain sqrt(2 / (1 + 5)), bound gain sqrt(3 / in) = 1 / sqrt(in) */
    double bound = 1.0 / sqrt((double)in);
    if (init) {
        uint64_t offset = gc_generator_take(init, gc_uniform_words((int64_t)config->r * in));
        lora->a = gc_nn_parameter(gc_uniform(GC_SHAPE(config->r, in), dtype, device, -bound, bound, init->seed, offset));
    } else {
        lora->a = gc_nn_parameter(gc_zeros(GC_SHAPE(config->r, in), dtype, device));
    }
    lora->b = gc_nn_parameter(gc_zeros(GC_SHAPE(out, config->r), dtype, device));
    if (!lora->a || !lora->b) {
        gc_tensor_release(lora->a);
        gc_tensor_release(lora->b);
        free(lora);
        return gc_last_status();
    }
    gc_set_requires_grad(layer->weight, false);
    if (layer->bias) gc_set_requires_grad(layer->bias, false);
    layer->lora = lora;
    return GC_OK;
}

gc_dtype gc_lora_dtype(gc_dtype base) { return gc_dtype_size(base) == 2 ? GC_F32 : base; }

/* x converted to `dtype` (a new reference to x itself when it has it already; NULL to NULL). */
static gc_tensor *as_dtype(const gc_tensor *x, gc_dtype dtype) {
    if (!x) return NULL;
    return x->dtype == dtype ? gc_tensor_retain((gc_tensor *)x) : gc_cast(x, dtype);
}

/* (alpha / r) B A dropout(rows) [n, out], in the adapter's dtype */
static gc_tensor *lora_update(const gc_lora *lora, const gc_tensor *rows /* [n, in] */, bool training,
                              const gc_token_packing *packing) {
    gc_tensor *wide = as_dtype(rows, lora->a->dtype);
    gc_tensor *dropped = gc_nn_then(wide, gc_tokens_dropout(wide, lora->dropout, training, packing));
    gc_tensor *low = gc_nn_then(dropped, gc_matmul(dropped, lora->a, false, true)); /* [n, r] */
    gc_tensor *update = gc_nn_then(low, gc_matmul(low, lora->b, false, true));      /* [n, out] */
    return gc_nn_then(update, gc_mul_scalar(update, lora->scale));
}

gc_tensor *gc_lora_add(const gc_lora *lora, gc_tensor *y /* [n, out] */, const gc_tensor *rows /* [n, in] */,
                       bool training, const gc_token_packing *packing) {
    if (!y) return NULL;
    gc_dtype dtype = y->dtype;
    gc_tensor *update = lora_update(lora, rows, training, packing); /* [n, out] */
    /* over a 16-bit base the sum is the adapter's f32, rounded once, as PEFT's
     * (result + lora_B(lora_A(x)) * scaling).to(result's dtype) */
    gc_tensor *wide = gc_nn_then(y, as_dtype(y, lora->a->dtype));
    gc_tensor *sum = gc_add(wide, update);
    gc_tensor_release(wide);
    gc_tensor_release(update);
    return gc_nn_then(sum, as_dtype(sum, dtype));
}

gc_status gc_lora_merge(gc_linear *layer) {
    if (!layer->lora) return GC_OK;
    const gc_lora *lora = layer->lora;
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *product = gc_matmul(lora->b, lora->a, false, false); /* [out, in] */
    gc_tensor *scaled = gc_nn_then(product, gc_mul_scalar(product, lora->scale));
    gc_tensor *delta = gc_nn_then(scaled, as_dtype(scaled, layer->weight->dtype));
    gc_status status = delta ? gc_add_inplace(layer->weight, delta) : gc_last_status();
    gc_set_grad_enabled(previous);
    gc_tensor_release(delta);
    if (status != GC_OK) return status;
    gc_lora_free(layer->lora);
    layer->lora = NULL;
    return GC_OK;
}

void gc_lora_params(const gc_lora *lora, const char *prefix, gc_param_list *list) {
    gc_param_list_add(list, prefix, "lora_A.weight", lora->a, false);
    gc_param_list_add(list, prefix, "lora_B.weight", lora->b, false);
}

void gc_lora_free(gc_lora *lora) {
    if (!lora) return;
    gc_tensor_release(lora->a);
    gc_tensor_release(lora->b);
    free(lora);
}
