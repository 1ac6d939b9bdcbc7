/* Step 7: mixed precision. The towers of examples/dual_encoder.c's task (a passage is its
 * query spelled with another alphabet) hold f16 parameters and compute in f16, while AdamW
 * keeps an f32 master copy of each parameter and updates that. f16 gradients underflow
 * where they are small, so a dynamic loss scaler multiplies the loss (once per step, inside
 * Gradient Cache) and the optimizer divides the gradients back in f32. Started at 2^24 on
 * purpose, the scale overflows the first gradients: those steps are skipped, the scale
 * halved, until it fits; from then on the loss falls as in f32.
 * Build: cc 07_mixed_precision.c $(pkg-config --cflags --libs gradcache). Exit status 0 when
 * some steps were skipped and the loss still fell by a third. */
#include <stdio.h>

#include <gradcache/gradcache.h>

enum { VOCAB = 32, LENGTH = 6, BATCH = 32, CHUNK = 8, STEPS = 60 };

static gc_tensor *encode(void *tower, const gc_batch *chunk) {
    return gc_text_encoder_forward(tower, chunk->tensors[0], chunk->tensors[1], true);
}

int main(void) {
    gc_text_encoder_config config = {.vocab = VOCAB, .max_length = LENGTH, .dim = 32, .heads = 4, .layers = 1,
                                     .hidden = 64, .activation = GC_ACT_GELU_ERF, .pooling = GC_POOL_MEAN,
                                     .dtype = GC_F16};
    gc_generator init = {11, 0};
    gc_text_encoder towers[2];
    gc_param_list params = {0};
    for (int t = 0; t < 2; t++) {
        if (gc_text_encoder_init(&towers[t], &config, gc_cpu(), &init) != GC_OK) return 1;
        gc_text_encoder_params(&towers[t], t ? "passage" : "query", &params);
    }
    gc_adamw adamw; /* with f16 parameters it keeps f32 masters (gradcache/optim.h) */
    gc_adamw_init(&adamw, &params, 3e-3, 0.9, 0.999, 1e-8, 0.01);
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    scaler.scale = 1 << 24; /* far too large, to show the scaler at work */
    gc_contrastive_options loss_options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_cache *cache = gc_cache_new(&(gc_cache_config){
        .n_models = 2, .models = {{&towers[0], encode, CHUNK, NULL}, {&towers[1], encode, CHUNK, NULL}},
        .loss = gc_contrastive_loss_fn(&loss_options), .scaler = &scaler});

    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        gc_tensor *uniform = gc_uniform(GC_SHAPE(BATCH, LENGTH), GC_F32, gc_cpu(), 0, VOCAB, 500 + step, 0);
        gc_tensor *queries = gc_cast(uniform, GC_I32), *spelled = gc_mul_scalar(queries, 5);
        int32_t *p = gc_data(spelled);
        for (int i = 0; i < BATCH * LENGTH; i++) p[i] = (p[i] + 3) % VOCAB;
        gc_tensor *mask = gc_ones(GC_SHAPE(BATCH, LENGTH), GC_F16, gc_cpu());
        gc_batch inputs[2] = {{2, {"ids", "mask"}, {queries, mask}}, {2, {"ids", "mask"}, {spelled, mask}}};
        double loss;
        bool found_inf;
        if (gc_cache_step(cache, inputs, &loss, NULL) != GC_OK) return 1;
        gc_loss_scaler_check_grads(&params, &found_inf);
        if (!found_inf && gc_adamw_step_scaled(&adamw, 1 / scaler.scale) != GC_OK) return 1;
        if (found_inf) printf("step %2d: an inf or nan gradient at scale %.0f: skipped\n", step, scaler.scale);
        gc_loss_scaler_update(&scaler, found_inf);
        gc_param_list_zero_grad(&params);
        if (step == 0) first = loss;
        last = loss;
        gc_tensor *all[] = {uniform, queries, spelled, mask};
        for (int i = 0; i < 4; i++) gc_tensor_release(all[i]);
    }
    printf("loss %.4f -> %.4f in f16; %lld steps skipped; the scale is now %.0f\n", first, last,
           (long long)scaler.skipped_steps, scaler.scale);
    bool right = scaler.skipped_steps > 0 && last < 2 * first / 3;
    printf("example 07_mixed_precision: %s\n", right ? "ok" : "WRONG");
    gc_cache_free(cache);
    gc_adamw_free(&adamw);
    gc_param_list_free(&params);
    for (int t = 0; t < 2; t++) gc_text_encoder_free(&towers[t]);
    gc_shutdown();
    return right ? 0 : 1;
}
