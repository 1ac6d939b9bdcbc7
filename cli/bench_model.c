/* The model of verify and the benchmarks (see bench_model.h). */
#include <stdio.h>

#include "bench_model.h"

const char *const cli_bench_device_names[] = {"cpu", "cuda", NULL};
const char *const cli_bench_attention_names[] = {"composed", "fused", NULL};

int cli_bench_model_check(const char *command, const cli_bench_model_options *options, gc_device *device) {
    if (!options->init && options->dim % options->heads != 0) {
        fprintf(stderr, "gradcache %s: --heads %lld does not divide --dim %lld\n", command, (long long)options->heads,
                (long long)options->dim);
        return 2;
    }
    *device = options->device == 0 ? gc_cpu() : gc_cuda(0);
    if (device->type == GC_DEVICE_CUDA && gc_cuda_device_count() < 1) {
        fprintf(stderr, "gradcache %s: --device cuda: %s\n", command,
                gc_cuda_built() ? "no CUDA device is usable" : "this build has no CUDA backend");
        return 2;
    }
    return 0;
}

gc_status cli_bench_model_setup(gc_bench_setup *setup, const cli_bench_model_options *options, gc_dtype dtype,
                                gc_device device) {
    gc_set_weight_packing(options->weight_packing == CLI_PACKING_ON);
    gc_set_fused_attention(options->attention == CLI_ATTENTION_FUSED);
    if (options->init)
        return gc_bench_setup_from_folder(setup, options->init, options->max_length, dtype, (uint64_t)options->seed,
                                          device);
    gc_text_encoder_config config = {.vocab = GC_TOKEN_VOCAB,
                                     .max_length = options->max_length,
                                     .dim = options->dim,
                                     .heads = (int)options->heads,
                                     .layers = (int)options->layers,
                                     .hidden = options->hidden,
                                     .dropout = options->dropout,
                                     .activation = GC_ACT_GELU_ERF,
                                     .pooling = GC_POOL_MEAN,
                                     .dtype = dtype};
    return gc_bench_setup_init(setup, &config, options->tied, (uint64_t)options->seed, device);
}

const char *cli_bench_model_describe(const cli_bench_model_options *options, char *buf, int size) {
    if (options->init) {
        snprintf(buf, (size_t)size, "pretrained %s (tied, max length %lld)", options->init,
                 (long long)options->max_length);
        return buf;
    }
    snprintf(buf, (size_t)size, "%s encoder (dim %lld, %lld layers, %lld heads, hidden %lld, max length %lld, dropout %g)",
             options->tied ? "tied" : "dual", (long long)options->dim, (long long)options->layers,
             (long long)options->heads, (long long)options->hidden, (long long)options->max_length, options->dropout);
    return buf;
}
