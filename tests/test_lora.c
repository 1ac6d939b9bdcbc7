/* LoRA adapters (nn/layers/lora.c, nn/pretrained/lora_targets.c): the adapted Linear's function,
 * PEFT's initialisation and target matching, and Gradient Cache over adapted text encoders:
 * in f64 with dropout on (the model's and the adapters'), padded rows and hard negatives, a
 * cached step's adapter gradients equal the full batch's to a norm-relative 1e-10, for tied
 * and separate encoders, with and without layer checkpointing. f64 rounding (1e-16 per op)
 * summed over a few thousand ops and divided by the losses' cancellations stays far below
 * 1e-10, while one wrong dropout mask or a gradient reaching a frozen weight moves it by
 * more than 1e-3. Training leaves the base's bytes as they were; only adapters learn. Over a
 * bf16 or f16 base the adapters are f32: the layer against f64, a cached step against the
 * full batch at verify's 16-bit tolerance, and the exact bytes training adds (no masters). */
#include <math.h>
#include <string.h>

#include "lora_checks.h"

/* --- the layer --- */

static double max_abs_difference(const gc_tensor *a, const gc_tensor *b) {
    const double *x = gc_data(a), *y = gc_data(b);
    double worst = 0;
    for (int64_t i = 0; i < gc_numel(a); i++) worst = fmax(worst, fabs(x[i] - y[i]));
    return worst;
}

/* y = x W^T + b + (alpha / r) (x A^T) B^T, with B = 0 first (the base alone), A inside PEFT's
 * bound 1 / sqrt(in); the base frozen and the adapter's names PEFT's. */
static void test_layer(void) {
    gc_generator init = {3, 0};
    gc_linear layer;
    REQUIRE(gc_linear_init(&layer, 5, 3, true, GC_F64, gc_cpu(), &init) == GC_OK);
    gc_tensor *x = gc_uniform(GC_SHAPE(2, 4, 5), GC_F64, gc_cpu(), -1, 1, 11, 0);
    gc_tensor *base = gc_linear_forward(&layer, x);
    gc_lora_config config = {.r = 2, .alpha = 6, .dropout = 0.5};
    REQUIRE(gc_lora_attach(&layer, &config, &init) == GC_OK);
    CHECK(!gc_requires_grad(layer.weight) && !gc_requires_grad(layer.bias));
    CHECK(gc_requires_grad(layer.lora->a) && gc_requires_grad(layer.lora->b));
    CHECK_NEAR(layer.lora->scale, 3.0, 0, 0);
    const double *a = gc_data(layer.lora->a);
    double largest = 0;
    for (int i = 0; i < 10; i++) largest = fmax(largest, fabs(a[i]));
    CHECK_MSG(largest > 0 && largest <= 1 / sqrt(5.0), "lora A: largest |value| %g outside (0, 1/sqrt 5]", largest);
    gc_tensor *start = gc_linear_forward(&layer, x);
    CHECK_MSG(max_abs_difference(start, base) == 0, "lora: with B = 0 the adapted Linear differs from its base");

    gc_param_list params = {0};
    gc_linear_params(&layer, "q", &params);
    randomise_b(&params, 4);
    gc_tensor *adapted = gc_linear_forward(&layer, x);
    gc_tensor *rows = gc_reshape(x, GC_SHAPE(8, 5));
    gc_tensor *low = gc_matmul(rows, layer.lora->a, false, true);
    gc_tensor *update = gc_matmul(low, layer.lora->b, false, true);
    gc_tensor *scaled = gc_mul_scalar(update, 3.0), *flat_base = gc_reshape(base, GC_SHAPE(8, 3));
    gc_tensor *want = gc_add(flat_base, scaled), *got = gc_reshape(adapted, GC_SHAPE(8, 3));
    /* the same ops in another order: a few f64 roundings of values below 10 */
    CHECK_MSG(max_abs_difference(got, want) <= 1e-13, "lora: adapted output off by %g",
              max_abs_difference(got, want));
    CHECK(params.count == 4 && !strcmp(params.items[2].name, "q.lora_A.weight") &&
          !strcmp(params.items[3].name, "q.lora_B.weight"));
    gc_param_list trainable = {0};
    gc_param_list_trainable(&params, &trainable);
    CHECK(trainable.count == 2 && trainable.items[0].tensor == layer.lora->a);
    gc_param_list_free(&trainable);
    gc_param_list_free(&params);
    RELEASE(x, base, start, adapted, rows, low, update, scaled, flat_base, want, got);
    gc_linear_free(&layer);
}

/* ||got - want|| / ||want||, either of any float dtype, in f64. */
static double relative_difference(const gc_tensor *got, const gc_tensor *want) {
    gc_tensor *a = gc_cast(got, GC_F64), *b = gc_cast(want, GC_F64);
    REQUIRE(a && b && gc_numel(a) == gc_numel(b));
    const double *x = gc_data(a), *y = gc_data(b);
    double difference = 0, norm = 0;
    for (int64_t i = 0; i < gc_numel(a); i++) difference += (x[i] - y[i]) * (x[i] - y[i]), norm += y[i] * y[i];
    RELEASE(a, b);
    return sqrt(difference / norm);
}

/* A 16-bit Linear with its f32 adapter against the same values in f64. The output: the base's
 * product rounded to 16 bits once, the adapter's f32 update added in f32 and the sum rounded
 * once, so within 2u of the f64 result (u = 2^-8 for bf16, 2^-11 for f16; f32's sums of 64
 * products add about 1e-6); adding the update after rounding it to 16 bits would also fit, but
 * a lost or 16-bit-trained adapter would not fit the gradients': the adapters' gradients come
 * from the 16-bit output gradient taken exactly into f32, so they equal f64's to f32 rounding
 * (1e-5 over sums of 64 terms). */
static void test_layer_half(gc_dtype dtype) {
    gc_generator init = {21, 0};
    gc_linear layer;
    REQUIRE(gc_linear_init(&layer, 64, 16, true, dtype, gc_cpu(), &init) == GC_OK);
    gc_lora_config config = {.r = 4, .alpha = 8};
    REQUIRE(gc_lora_attach(&layer, &config, &init) == GC_OK);
    CHECK(layer.weight->dtype == dtype && layer.lora->a->dtype == GC_F32 && layer.lora->b->dtype == GC_F32);
    gc_param_list params = {0};
    gc_linear_params(&layer, "q", &params);
    randomise_b(&params, 22);
    gc_param_list_free(&params);
    gc_tensor *x = gc_uniform(GC_SHAPE(3, 64), dtype, gc_cpu(), -1, 1, 23, 0);
    gc_tensor *seed = gc_uniform(GC_SHAPE(3, 16), dtype, gc_cpu(), -1, 1, 24, 0);
    gc_tensor *y = gc_linear_forward(&layer, x);
    REQUIRE(x && seed && y && y->dtype == dtype);
    REQUIRE(gc_backward(&y, &seed, 1) == GC_OK);

    /* f64: every 16-bit and f32 value is exact there */
    gc_tensor *x64 = gc_cast(x, GC_F64), *g64 = gc_cast(seed, GC_F64), *w64 = gc_cast(layer.weight, GC_F64);
    gc_tensor *b64 = gc_cast(layer.bias, GC_F64), *a64 = gc_cast(layer.lora->a, GC_F64);
    gc_tensor *lb64 = gc_cast(layer.lora->b, GC_F64);
    gc_tensor *base = gc_matmul_bias(x64, w64, b64, false, true), *low = gc_matmul(x64, a64, false, true);
    gc_tensor *product = gc_matmul(low, lb64, false, true), *update = gc_mul_scalar(product, 2.0);
    gc_tensor *want = gc_add(base, update);
    double u = dtype == GC_BF16 ? 0x1p-8 : 0x1p-11;
    CHECK_MSG(relative_difference(y, want) <= 2 * u, "lora %s: output off by %.3g of its norm",
              gc_dtype_name(dtype), relative_difference(y, want));
    gc_tensor *g_low = gc_matmul(g64, lb64, false, false);                                   /* [3, r] */
    gc_tensor *grad_b = gc_matmul(g64, low, true, false), *grad_a = gc_matmul(g_low, x64, true, false);
    gc_tensor *want_b = gc_mul_scalar(grad_b, 2.0), *want_a = gc_mul_scalar(grad_a, 2.0);
    CHECK(gc_grad(layer.weight) == NULL && gc_grad(layer.lora->a)->dtype == GC_F32);
    CHECK_MSG(relative_difference(gc_grad(layer.lora->b), want_b) <= 1e-5, "lora %s: B's gradient off by %.3g",
              gc_dtype_name(dtype), relative_difference(gc_grad(layer.lora->b), want_b));
    CHECK_MSG(relative_difference(gc_grad(layer.lora->a), want_a) <= 1e-5, "lora %s: A's gradient off by %.3g",
              gc_dtype_name(dtype), relative_difference(gc_grad(layer.lora->a), want_a));
    RELEASE(x, seed, y, x64, g64, w64, b64, a64, lb64, base, low, product, update, want, g_low, grad_b,
            grad_a, want_b, want_a);
    gc_linear_free(&layer);
}

/* --- targets --- */

static int attach_count(gc_text_encoder_config config, const char *targets, gc_status *status) {
    gc_text_encoder encoder;
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), NULL) == GC_OK);
    gc_lora_config lora = {.r = 4, .alpha = 8, .targets = targets};
    int attached = -1;
    *status = gc_lora_attach_targets(&encoder, &lora, NULL, &attached);
    gc_text_encoder_free(&encoder);
    return attached;
}

/* PEFT's matching over Hugging Face's module names (BERT's, the decoder family's) and
 * gradcache's (no layout); a target that matches nothing, an empty list, r = 0 are errors. */
static void test_targets(void) {
    gc_text_encoder_config bert = tiny_config(GC_F64);
    bert.projection = 0;
    gc_status status;
    CHECK(attach_count(bert, "query,value", &status) == 4 && status == GC_OK);
    /* attention.output.dense, intermediate.dense and output.dense in each of the 2 layers */
    CHECK(attach_count(bert, "dense", &status) == 6 && status == GC_OK);
    CHECK(attach_count(bert, "self.key", &status) == 2 && status == GC_OK);
    CHECK(attach_count(bert, "query,q_proj", &status) == 0 && status == GC_ERR_CONFIG);
    CHECK(strstr(gc_last_error(), "'q_proj'") != NULL);
    CHECK(attach_count(bert, "uery", &status) == 0 && status == GC_ERR_CONFIG); /* whole names only */
    CHECK(attach_count(bert, "", &status) == 0 && status == GC_ERR_CONFIG);

    gc_text_encoder_config decoder = tiny_config(GC_F64);
    decoder.projection = 0, decoder.pre_norm = decoder.rms_norm = decoder.gated_mlp = true;
    decoder.attention = (gc_attention_options){.rope_theta = 10000, .causal = true};
    decoder.pooling = GC_POOL_LAST;
    CHECK(attach_count(decoder, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", &status) == 14 &&
          status == GC_OK);

    gc_text_encoder_config scratch = tiny_config(GC_F64);
    CHECK(attach_count(scratch, "attention.query,projection", &status) == 3 && status == GC_OK);
    gc_text_encoder encoder;
    REQUIRE(gc_text_encoder_init(&encoder, &scratch, gc_cpu(), NULL) == GC_OK);
    gc_lora_config zero_rank = {.r = 0, .alpha = 8, .targets = "projection"};
    CHECK(gc_lora_attach_targets(&encoder, &zero_rank, NULL, NULL) == GC_ERR_CONFIG);
    CHECK(encoder.projection.lora == NULL && gc_requires_grad(encoder.projection.weight));
    gc_text_encoder_free(&encoder);
}

/* Three AdamW steps of cached training over the adapters: the base's bytes stay as they were
 * (no gradient, no optimizer state, no weight decay reaches them), the adapters move. Over a
 * 16-bit base the adapters are f32, and what training adds to memory (gc_memory_get_stats'
 * exact count) is their gradients and AdamW's two f32 moments, 12 bytes an adapter parameter:
 * no f32 master copy, of the base or of the adapters. */
static void test_base_unchanged(gc_dtype dtype) {
    gc_text_encoder encoder = make_adapted(7, "attention.query,attention.value,mlp.in,mlp.out", false, dtype);
    gc_param_list all = {0}, trainable = {0};
    gc_text_encoder_params(&encoder, "", &all);
    gc_param_list_trainable(&all, &trainable);
    CHECK(trainable.count == 2 * 4 * 2); /* A and B of 4 Linears in 2 layers */
    for (int i = 0; i < trainable.count; i++) {
        CHECK(strstr(trainable.items[i].name, ".lora_") != NULL);
        CHECK(trainable.items[i].tensor->dtype == (gc_dtype_size(dtype) == 2 ? GC_F32 : dtype));
    }
    gc_tensor **before = calloc((size_t)all.count, sizeof *before);
    for (int i = 0; i < all.count; i++) before[i] = gc_clone(all.items[i].tensor);
    dual_batch batch;
    make_batch(&batch, dtype, 0);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_cache_config cache_config = {
        .n_models = 2,
        .models = {{&encoder, text_forward, 2, &trainable}, {&encoder, text_forward, 3, &trainable}},
        .loss = gc_contrastive_loss_fn(&options)};
    gc_cache *cache = gc_cache_new(&cache_config);
    size_t untrained = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_adamw adamw;
    REQUIRE(gc_adamw_init(&adamw, &trainable, 1e-2, 0.9, 0.999, 1e-8, 0.1) == GC_OK);
    gc_manual_seed(10);
    for (int step = 0; step < 3; step++) {
        double loss;
        gc_param_list_zero_grad(&trainable);
        REQUIRE(gc_cache_step(cache, batch.inputs, &loss, NULL) == GC_OK);
        REQUIRE(gc_adamw_step(&adamw) == GC_OK);
    }
    size_t training = gc_memory_get_stats(gc_cpu()).live_bytes - untrained;
    size_t adapters = (size_t)gc_param_list_numel(&trainable);
    size_t gradients = adapters * gc_dtype_size(trainable.items[0].tensor->dtype), moments = adapters * 2 * 4;
    CHECK_MSG(training == gradients + moments, "%s: training holds %zu bytes, not the adapters' gradients (%zu) and "
              "f32 moments (%zu)", gc_dtype_name(dtype), training, gradients, moments);
    for (int i = 0; i < all.count; i++) {
        gc_tensor *now = all.items[i].tensor;
        bool same = !memcmp(gc_data(now), gc_data(before[i]), (size_t)gc_numel(now) * gc_dtype_size(now->dtype));
        bool adapter = gc_requires_grad(now);
        CHECK_MSG(adapter ? !same : same, "%s %s by training", all.items[i].name, adapter ? "unchanged" : "changed");
        gc_tensor_release(before[i]);
    }
    free(before);
    gc_adamw_free(&adamw);
    gc_cache_free(cache);
    free_batch(&batch);
    gc_param_list_free(&all);
    gc_param_list_free(&trainable);
    gc_text_encoder_free(&encoder);
}

int main(void) {
    test_layer();
    test_layer_half(GC_BF16);
    test_layer_half(GC_F16);
    test_targets();
    check_cached_step("tied", true, false, GC_F64, NULL);
    check_cached_step("separate encoders", false, false, GC_F64, NULL);
    check_cached_step("tied, layer checkpointing", true, true, GC_F64, NULL);
    check_cached_step("separate, layer checkpointing", false, true, GC_F64, NULL);
    check_cached_step("bf16 base, tied", true, false, GC_BF16, NULL);
    check_cached_step("bf16 base, separate, layer checkpointing", false, true, GC_BF16, NULL);
    check_cached_step("f16 base, tied, layer checkpointing", true, true, GC_F16, NULL);
    test_base_unchanged(GC_F64);
    test_base_unchanged(GC_BF16);
    test_base_unchanged(GC_F16);
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
