/* Packing a padded batch's real tokens (layer_util.h, gc_token_packing): two gathers through
 * gc_embedding, which reads rows of a table by i32 index, so that packing and unpacking run
 * on every device and dtype, and are differentiable where a graph is recorded. */
#include <stdlib.h>

#include "layer_util.h"

/* mask's values into host memory: a CPU mask read where it lies (no copy to the host:
 * nothing waits, so a GradCache chunk on the CPU may pack), a device's copied (one counted
 * copy, and the wait for the work queued before it). */
static void read_mask(const gc_tensor *mask, double *real) {
    if (mask->device.type != GC_DEVICE_CPU) {
        gc_to_host_f64(mask, real);
        return;
    }
    const void *values = gc_data(mask);
    for (int64_t i = 0, n = gc_numel(mask); i < n; i++) real[i] = gc_element_f64(values, mask->dtype, i);
}

bool gc_token_packing_make(const gc_tensor *mask /* [B, T] */, gc_token_packing *packing) {
    int64_t batch = mask->shape[0], length = mask->shape[1], positions = batch * length;
    double *real = malloc((size_t)(positions ? positions : 1) * sizeof *real);
    int32_t *rows = malloc((size_t)(positions ? positions : 1) * sizeof *rows);
    int32_t *real_positions = malloc((size_t)(positions ? positions : 1) * sizeof *real_positions);
    if (!real || !rows || !real_positions) gc_fatal("token_packing: out of host memory for %lld positions",
                                                    (long long)positions);
    read_mask(mask, real);
    int64_t tokens = 0;
    for (int64_t i = 0; i < positions; i++)
        if (real[i] != 0) real_positions[tokens++] = (int32_t)i;
    for (int64_t i = 0, next = 0; i < positions; i++) rows[i] = (int32_t)(real[i] != 0 ? next++ : tokens);
    bool worth = tokens < positions && positions <= INT32_MAX;
    if (worth) {
        *packing = (gc_token_packing){.batch = batch, .length = length, .tokens = tokens};
        packing->positions = gc_from_host(real_positions, GC_SHAPE(tokens), GC_I32, mask->device);
        packing->rows = gc_from_host(rows, GC_SHAPE(positions), GC_I32, mask->device);
        if (!packing->positions || !packing->rows) {
            gc_token_packing_free(packing);
            worth = false;
        }
    }
    free(real);
    free(rows);
    free(real_positions);
    return worth;
}

void gc_token_packing_free(gc_token_packing *packing) {
    gc_tensor_release(packing->positions);
    gc_tensor_release(packing->rows);
    *packing = (gc_token_packing){0};
}

gc_tensor *gc_tokens_pack(const gc_tensor *x /* [B, T, dim] */, const gc_token_packing *packing) {
    if (!x) return NULL;
    gc_tensor *flat = gc_reshape(x, GC_SHAPE(packing->batch * packing->length, x->shape[2]));
    return gc_nn_then(flat, gc_embedding(flat, packing->positions)); /* [N, dim] */
}

gc_tensor *gc_tokens_unpack(const gc_tensor *x /* [N, dim] */, const gc_token_packing *packing) {
    if (!x) return NULL;
    int64_t dim = x->shape[1];
    gc_tensor *zero = gc_zeros(GC_SHAPE(1, dim), x->dtype, x->device);
    gc_tensor *table = gc_nn_then(zero, gc_cat0((gc_tensor *const[]){(gc_tensor *)x, zero}, 2)); /* [N + 1, dim] */
    gc_tensor *flat = gc_nn_then(table, gc_embedding(table, packing->rows));                       /* [B * T, dim] */
    return gc_nn_then(flat, gc_reshape(flat, GC_SHAPE(packing->batch, packing->length, dim)));
}

gc_tensor *gc_tokens_dropout(const gc_tensor *x /* [N, dim] or [B, T, dim] */, double p, bool training,
                             const gc_token_packing *packing) {
    if (!x || !packing || !training || p == 0) return gc_nn_dropout(x, p, training);
    /* the words of the padded [B, T, dim], each real token's row drawing its own */
    gc_generator *generator = gc_default_generator(x->device);
    uint64_t offset = gc_generator_take(generator, (uint64_t)(packing->batch * packing->length * x->shape[1]));
    return gc_dropout_rows(x, packing->positions, p, generator->seed, offset);
}
