/* The text encoder's checkpoint_layers (gc_checkpoint around each layer): the same gradients
 * bitwise as without it, with dropout on, in a plain step and a Gradient Cache step, in f32 and
 * f64, for BERT's layers and (cached, f32) the decoder family's; the RNG stream left where it
 * was; a peak at most 9/10 of the one without (so that checkpointing silently off fails). The
 * function itself: test_autograd_checkpoint.c. */
#include "check.h"
#include "same_bytes.h"

enum { VOCAB = 48, LENGTH = 10, BATCH = 12, CHUNK = 3, LAYERS = 3 };

static gc_tensor *encode(void *tower, const gc_batch *chunk) {
    return gc_text_encoder_forward(tower, chunk->tensors[0], chunk->tensors[1], true);
}

typedef struct fixture {
    gc_text_encoder towers[2];
    gc_param_list params[2];
    gc_tensor *ids, *mask, *queries, *passages; /* ids i32 [2 BATCH, LENGTH], mask [BATCH, LENGTH] */
    gc_batch inputs[2];
} fixture;

/* Two towers with dropout, BERT's layers or the decoder family's (pre-norm RMSNorms, SwiGLU,
 * grouped-query causal attention with rotary positions: the rotary table is a kept input too),
 * and a mask whose rows keep 4 to 10 tokens (so the bias is kept too). */
static void fixture_init(fixture *f, gc_dtype dtype, bool decoder) {
    gc_text_encoder_config config = {.vocab = VOCAB, .max_length = LENGTH, .dim = 16, .heads = 2, .layers = LAYERS,
                                     .hidden = 32, .dropout = 0.1, .activation = GC_ACT_GELU_ERF,
                                     .pooling = GC_POOL_MEAN, .dtype = dtype};
    if (decoder) {
        config.pre_norm = config.rms_norm = config.gated_mlp = config.no_mlp_bias = true;
        config.pooling = GC_POOL_LAST;
        config.attention = (gc_attention_options){.kv_heads = 1, .head_dim = 8, .causal = true, .rope_theta = 1e4};
    }
    gc_generator init = {5, 0};
    for (int t = 0; t < 2; t++) {
        f->params[t] = (gc_param_list){0};
        REQUIRE(gc_text_encoder_init(&f->towers[t], &config, gc_cpu(), &init) == GC_OK);
        gc_text_encoder_params(&f->towers[t], t ? "passage" : "query", &f->params[t]);
    }
    gc_tensor *uniform = gc_uniform(GC_SHAPE(2 * BATCH, LENGTH), GC_F32, gc_cpu(), 0, VOCAB, 9, 0);
    f->ids = gc_cast(uniform, GC_I32);
    gc_tensor_release(uniform);
    double host[BATCH * LENGTH];
    for (int r = 0; r < BATCH; r++)
        for (int t = 0; t < LENGTH; t++) host[r * LENGTH + t] = t < 4 + r % 7;
    gc_tensor *mask = gc_from_host(host, GC_SHAPE(BATCH, LENGTH), GC_F64, gc_cpu());
    f->mask = gc_cast(mask, dtype);
    gc_tensor_release(mask);
    f->queries = gc_slice0(f->ids, 0, BATCH);
    f->passages = gc_slice0(f->ids, BATCH, 2 * BATCH);
    f->inputs[0] = (gc_batch){2, {"ids", "mask"}, {f->queries, f->mask}};
    f->inputs[1] = (gc_batch){2, {"ids", "mask"}, {f->passages, f->mask}};
}

static void fixture_free(fixture *f) {
    gc_tensor *all[] = {f->ids, f->mask, f->queries, f->passages};
    for (int i = 0; i < 4; i++) gc_tensor_release(all[i]);
    for (int t = 0; t < 2; t++) {
        gc_param_list_free(&f->params[t]);
        gc_text_encoder_free(&f->towers[t]);
    }
}

/* What one step leaves behind. */
typedef struct outcome {
    double loss;
    gc_tensor *grads[2][64]; /* copies of each tower's parameters' gradients */
    size_t peak;             /* bytes above what was live before the step */
    uint64_t rng_offset;     /* the CPU generator's, after the step */
} outcome;

/* One step from the same random state: cached (chunks of CHUNK) or plain (one chunk, one graph). */
static outcome step(fixture *f, bool checkpoint, bool cached) {
    gc_contrastive_options loss_options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    int64_t chunk = cached ? CHUNK : BATCH;
    gc_cache_config config = {
        .n_models = 2,
        .models = {{&f->towers[0], encode, chunk, &f->params[0]}, {&f->towers[1], encode, chunk, &f->params[1]}},
        .loss = gc_contrastive_loss_fn(&loss_options),
    };
    gc_cache *cache = gc_cache_new(&config);
    outcome o = {0};
    for (int t = 0; t < 2; t++) {
        f->towers[t].checkpoint_layers = checkpoint;
        gc_param_list_zero_grad(&f->params[t]);
    }
    gc_manual_seed(11);
    gc_memory_reset_peak(gc_cpu());
    size_t before = gc_memory_get_stats(gc_cpu()).live_bytes; /* the parameters, and an earlier step's copies */
    REQUIRE((cached ? gc_cache_step(cache, f->inputs, &o.loss, NULL)
                    : gc_cache_full_batch_step(cache, f->inputs, &o.loss)) == GC_OK);
    o.peak = gc_memory_get_stats(gc_cpu()).peak_bytes - before;
    o.rng_offset = gc_default_generator(gc_cpu())->offset;
    for (int t = 0; t < 2; t++) {
        REQUIRE(f->params[t].count <= 64);
        for (int i = 0; i < f->params[t].count; i++) {
            gc_tensor *grad = gc_grad(f->params[t].items[i].tensor);
            REQUIRE(grad);
            o.grads[t][i] = gc_clone(grad);
        }
    }
    gc_cache_free(cache);
    return o;
}

static void outcome_free(const fixture *f, outcome *o) {
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < f->params[t].count; i++) gc_tensor_release(o->grads[t][i]);
}

static void test_same_gradients(gc_dtype dtype, bool cached, bool decoder) {
    fixture f;
    fixture_init(&f, dtype, decoder);
    outcome plain = step(&f, false, cached), checkpointed = step(&f, true, cached);
    const char *what = decoder ? (cached ? "decoder cached step" : "decoder plain step")
                               : (cached ? "cached step" : "plain step");
    CHECK_MSG(plain.loss == checkpointed.loss, "%s %s: loss %.17g, checkpointed %.17g", what, gc_dtype_name(dtype),
              plain.loss, checkpointed.loss);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < f.params[t].count; i++) {
            char name[160];
            snprintf(name, sizeof name, "%s %s: %s", what, gc_dtype_name(dtype), f.params[t].items[i].name);
            gc_test_expect_same_bytes(plain.grads[t][i], checkpointed.grads[t][i], name);
        }
    CHECK_MSG(plain.rng_offset == checkpointed.rng_offset, "%s: the generator at %llu, checkpointed at %llu", what,
              (unsigned long long)plain.rng_offset, (unsigned long long)checkpointed.rng_offset);
    /* The layers' intermediates (a few times B T dim each, the attention probabilities B H T T)
     * make up most of a graph's memory here; checkpointing keeps one layer's at a time. */
    printf("%s %s: peak %zu bytes, checkpointed %zu\n", what, gc_dtype_name(dtype), plain.peak, checkpointed.peak);
    CHECK_MSG(checkpointed.peak < plain.peak * 9 / 10, "%s %s: peak %zu bytes, checkpointed %zu", what,
              gc_dtype_name(dtype), plain.peak, checkpointed.peak);
    outcome_free(&f, &plain);
    outcome_free(&f, &checkpointed);
    fixture_free(&f);
}

int main(void) {
    for (int cached = 0; cached < 2; cached++) {
        test_same_gradients(GC_F32, cached, false);
        test_same_gradients(GC_F64, cached, false);
    }
    test_same_gradients(GC_F32, true, true);
    gc_shutdown();
    return gc_test_result();
}
