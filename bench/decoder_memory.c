/* The shapes, options and measurements bench_decoder_memory's modes share (decoder_memory.h). */
#include "decoder_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static const char *const shape_names[SHAPE_COUNT] = {"qwen2.5-0.5b", "qwen3-0.6b", "mistral-7b"};
static const int shape_layers[SHAPE_COUNT] = {24, 28, 32};

const char *decoder_shape_name(decoder_shape shape) { return shape_names[shape]; }

static void usage(void) {
    fprintf(stderr, "usage: bench_decoder_memory [--table] [--shape qwen2.5-0.5b|qwen3-0.6b|mistral-7b] "
                    "[--layers N] [--length T] [--batch B] [--chunk C] [--dtype f32|bf16] [--lora-r R]\n");
    exit(2);
}

options decoder_memory_parse(int argc, char **argv) {
    options o = {.length = 256, .batch = 8, .chunk = 2, .dtype = GC_F32};
    int first = 1;
    if (argc > 1 && !strcmp(argv[1], "--table")) o.table = true, o.chunk = 4, o.dtype = GC_BF16, first = 2;
    if ((argc - first) % 2) usage();
    for (int i = first; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (!strcmp(flag, "--shape")) {
            o.shape = SHAPE_COUNT;
            for (int s = 0; s < SHAPE_COUNT; s++)
                if (!strcmp(value, shape_names[s])) o.shape = (decoder_shape)s;
            if (o.shape == SHAPE_COUNT) usage();
        } else if (!strcmp(flag, "--layers")) o.layers = atoi(value);
        else if (!strcmp(flag, "--length")) o.length = atoll(value);
        else if (!strcmp(flag, "--batch")) o.batch = atoll(value);
        else if (!strcmp(flag, "--chunk")) o.chunk = atoll(value);
        else if (!strcmp(flag, "--dtype")) o.dtype = !strcmp(value, "bf16") ? GC_BF16 : GC_F32;
        else if (!strcmp(flag, "--lora-r")) o.lora_r = atoi(value);
        else usage();
    }
    if (!o.layers) o.layers = shape_layers[o.shape];
    if (o.layers < 1 || o.length < 1 || o.chunk < 1 || o.batch < o.chunk || o.lora_r < 0) usage();
    return o;
}

gc_text_encoder_config decoder_shape_config(const options *o, int layers) {
    gc_text_encoder_config c = {.max_length = 32768, .layers = layers ? layers : shape_layers[o->shape],
                                .pre_norm = true, .pooling = GC_POOL_LAST, .normalize = true, .layernorm_eps = 1e-6,
                                .dtype = o->dtype, .rms_norm = true, .gated_mlp = true, .no_mlp_bias = true};
    c.attention = (gc_attention_options){.causal = true, .rope_theta = 1e6, .no_output_bias = true};
    switch (o->shape) {
    case SHAPE_QWEN25_05B: /* q/k/v biases, tied embeddings */
        c.vocab = 151936, c.dim = 896, c.heads = 14, c.hidden = 4864, c.attention.kv_heads = 2;
        break;
    case SHAPE_QWEN3_06B: /* a head_dim of 128 (not 1024 / 16), q/k RMSNorms, no biases */
        c.vocab = 151669, c.dim = 1024, c.heads = 16, c.hidden = 3072, c.attention.kv_heads = 8;
        c.attention.head_dim = 128, c.attention.qk_norm_eps = 1e-6, c.attention.no_qkv_bias = true;
        break;
    default: /* Mistral-7B-v0.1 (its 4096-token window changes nothing at T <= 4096) */
        c.vocab = 32000, c.dim = 4096, c.heads = 32, c.hidden = 14336, c.attention.kv_heads = 8;
        c.attention.rope_theta = 1e4, c.attention.no_qkv_bias = true, c.layernorm_eps = 1e-5;
    }
    return c;
}

size_t bench_live(void) { return gc_memory_get_stats(gc_cpu()).live_bytes; }
size_t bench_peak(void) { return gc_memory_get_stats(gc_cpu()).peak_bytes; }

void bench_require(gc_status status) {
    if (status != GC_OK) {
        fprintf(stderr, "bench_decoder_memory: %s\n", gc_last_error());
        exit(1);
    }
}

void decoder_model_init(gc_text_encoder *encoder, const options *o, int layers, gc_param_list *trainable) {
    gc_text_encoder_config config = decoder_shape_config(o, layers);
    gc_generator init = {29, 0};
    bench_require(gc_text_encoder_init(encoder, &config, gc_cpu(), &init));
    if (o->lora_r) {
        gc_lora_config lora = {.r = o->lora_r, .alpha = 2.0 * o->lora_r,
                               .targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"};
        bench_require(gc_lora_attach_targets(encoder, &lora, &init, NULL));
    }
    gc_param_list all = {0};
    gc_text_encoder_params(encoder, "", &all);
    gc_param_list_trainable(&all, trainable);
    gc_param_list_free(&all);
}

gc_batch decoder_random_batch(int64_t rows, const options *o, uint64_t seed) {
    double top = (double)decoder_shape_config(o, 1).vocab - 1;
    gc_tensor *uniform = gc_uniform(GC_SHAPE(rows, o->length), GC_F32, gc_cpu(), 0, top, seed, 0);
    gc_batch batch = {2, {"ids", "mask"}, {gc_cast(uniform, GC_I32), gc_ones(GC_SHAPE(rows, o->length), o->dtype, gc_cpu())}};
    gc_tensor_release(uniform);
    if (!batch.tensors[0] || !batch.tensors[1]) bench_require(gc_last_status());
    return batch;
}

void decoder_batch_free(gc_batch *batch) {
    gc_tensor_release(batch->tensors[0]);
    gc_tensor_release(batch->tensors[1]);
}

gc_tensor *decoder_forward(void *encoder, const gc_batch *chunk) {
    return gc_text_encoder_forward(encoder, chunk->tensors[0], chunk->tensors[1], true);
}

size_t decoder_plain_transient(gc_text_encoder *encoder, const gc_param_list *trainable, int64_t rows,
                               const options *o, double *seconds) {
    gc_batch chunk = decoder_random_batch(rows, o, 1);
    gc_param_list_zero_grad(trainable);
    size_t before = bench_live();
    gc_memory_reset_peak(gc_cpu());
    double start = gc_seconds();
    gc_tensor *y = decoder_forward(encoder, &chunk);
    if (!y) bench_require(gc_last_status());
    gc_tensor *seed = gc_ones(y->ndim, y->shape, y->dtype, gc_cpu());
    bench_require(gc_backward(&y, &seed, 1));
    size_t transient = bench_peak() - before;
    *seconds = gc_seconds() - start;
    gc_tensor_release(y);
    gc_tensor_release(seed);
    decoder_batch_free(&chunk);
    gc_param_list_zero_grad(trainable);
    return transient;
}

size_t decoder_adamw_bytes(const gc_param_list *trainable) {
    size_t bytes = 0;
    for (int i = 0; i < trainable->count; i++) {
        const gc_tensor *t = trainable->items[i].tensor;
        bytes += (size_t)gc_numel(t) * (gc_dtype_size(t->dtype) == 2 ? 3 * 4 : 2 * 4);
    }
    return bytes;
}
