/* Embedding: a learned table whose rows the ids select. */
#include "layer_util.h"

gc_status gc_embedding_layer_init(gc_embedding_layer *layer, int64_t vocab, int64_t dim, gc_dtype dtype,
                                  gc_device device, gc_generator *init) {
    gc_nn_check_sizes("embedding_layer", vocab, dim, dtype);
    layer->weight = gc_nn_normal_parameter(GC_SHAPE(vocab, dim), dtype, device, init);
    return layer->weight ? GC_OK : gc_last_status();
}

gc_tensor *gc_embedding_layer_forward(const gc_embedding_layer *layer, const gc_tensor *ids /* i32 [S...] */) {
    return gc_embedding(layer->weight, ids);
}

void gc_embedding_layer_params(const gc_embedding_layer *layer, const char *prefix, gc_param_list *list) {
    gc_param_list_add(list, prefix, "weight", layer->weight, false);
}

void gc_embedding_layer_free(gc_embedding_layer *layer) {
    gc_tensor_release(layer->weight);
    layer->weight = NULL;
}
