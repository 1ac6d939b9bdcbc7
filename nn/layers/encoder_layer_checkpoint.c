/* An encoder layer under activation checkpointing (gc_checkpoint, gradcache/autograd.h): the
 * graph keeps the layer's input and the shared attention inputs, and backward runs the layer
 * again. Its dropout masks must be the ones the forward drew, so the layer's state carries the
 * RNG context taken before the forward, and the recompute replays it (and then puts the
 * generators back, so that the stream goes on from where the whole forward left it). A packed
 * forward (x [N, dim], gc_token_packing) keeps the packing's two index tensors with x and
 * rebuilds the packing from them, so that the recompute skips the padding as the forward did. */
#include "gradcache/rng.h"
#include "layer_util.h"

typedef struct layer_call {
    const gc_encoder_layer *layer;
    bool training;
    bool fused;         /* the attention inputs' choice (gc_attention_inputs), kept for the recompute */
    gc_rng_context rng; /* as the forward found it */
} layer_call;

/* inputs: x [B, T, dim] (or [N, dim]), then the attention inputs: mask [B, T], bias, rotary,
 * and the packing's positions i32 [N] and rows i32 [B * T] (each may be NULL). */
static gc_tensor *run_layer(gc_tensor *const *inputs, int count, const void *state, bool recompute) {
    (void)count;
    const layer_call *call = state;
    gc_attention_inputs shared = {.mask = inputs[1], .bias = inputs[2], .rotary = inputs[3], .fused = call->fused};
    gc_token_packing packing;
    if (inputs[4]) {
        packing = (gc_token_packing){.batch = inputs[1]->shape[0], .length = inputs[1]->shape[1],
                                     .tokens = inputs[4]->shape[0], .positions = inputs[4], .rows = inputs[5]};
        shared.packing = &packing;
    }
    if (!recompute) return gc_encoder_layer_forward_with(call->layer, inputs[0], &shared, call->training);
    gc_rng_context after = gc_rng_replay_begin(&call->rng);
    gc_tensor *y = gc_encoder_layer_forward_with(call->layer, inputs[0], &shared, call->training);
    gc_rng_replay_end(&after);
    return y;
}

gc_tensor *gc_encoder_layer_forward_checkpointed(const gc_encoder_layer *layer,
                                                 const gc_tensor *x /* [B, T, dim] or [N, dim] */,
                                                 const gc_attention_inputs *inputs, bool training) {
    if (!x) return NULL;
    layer_call call = {.layer = layer, .training = training, .fused = inputs->fused, .rng = gc_rng_capture()};
    const gc_token_packing *packing = inputs->packing;
    gc_tensor *const kept[] = {(gc_tensor *)x,          (gc_tensor *)inputs->mask,
                               inputs->bias,            inputs->rotary,
                               packing ? packing->positions : NULL, packing ? packing->rows : NULL};
    return gc_checkpoint(run_layer, &call, sizeof call, kept, 6);
}
