/* The model that `verify` and the benchmarks run: a dual (or tied) text encoder whose sizes
 * come from flags, so that a sweep can scale one of them; the library measures it
 * (gc_bench_setup of gradcache/measure.h). */
#ifndef CLI_BENCH_MODEL_H
#define CLI_BENCH_MODEL_H

#include <stdbool.h>

#include "flags.h"
#include "gradcache/gradcache.h"

/* What the model flags set. */
typedef struct cli_bench_model_options {
    const char *init; /* a pretrained model folder instead of the sizes below, or NULL */
    int64_t dim, layers, heads, hidden, max_length;
    double dropout;
    bool tied;
    int device;   /* an index in cli_bench_device_names */
    int64_t seed; /* initialisation, synthetic data and dropout */
    int weight_packing; /* CLI_PACKING_*, applied by cli_bench_model_setup */
    int attention;      /* CLI_ATTENTION_*: gc_set_fused_attention, applied by cli_bench_model_setup */
} cli_bench_model_options;

extern const char *const cli_bench_device_names[]; /* "cpu", "cuda", NULL */
enum { CLI_ATTENTION_COMPOSED, CLI_ATTENTION_FUSED };
extern const char *const cli_bench_attention_names[]; /* "composed", "fused", NULL */

/* The model flags, as initialisers for a command's cli_flag table. */
#define CLI_BENCH_MODEL_FLAGS(options)                                                                     \
    {"init", CLI_FLAG_STRING, &(options).init, 0, 0, NULL,                                                 \
     "a pretrained model folder (tied; --max-length tokens) instead of the sizes below"},                  \
    {"dim", CLI_FLAG_INT, &(options).dim, 1, 8192, NULL, "model width"},                                   \
    {"layers", CLI_FLAG_INT, &(options).layers, 1, 64, NULL, "transformer layers"},                        \
    {"heads", CLI_FLAG_INT, &(options).heads, 1, 128, NULL, "attention heads (a divisor of --dim)"},       \
    {"hidden", CLI_FLAG_INT, &(options).hidden, 1, 65536, NULL, "inner width of each layer's MLP"},        \
    {"max-length", CLI_FLAG_INT, &(options).max_length, 2, 8192, NULL, "tokens per text, [CLS] included"}, \
    {"dropout", CLI_FLAG_DOUBLE, &(options).dropout, 0, 0.9, NULL, "dropout probability"},                 \
    {"tied", CLI_FLAG_BOOL, &(options).tied, 0, 0, NULL, "one encoder for queries and passages"},          \
    {"device", CLI_FLAG_CHOICE, &(options).device, 0, 0, cli_bench_device_names, "where to run"},          \
    {"seed", CLI_FLAG_INT, &(options).seed, 0, 9007199254740992.0, NULL, "initialisation, data and dropout"}, \
    CLI_WEIGHT_PACKING_FLAG((options).weight_packing),                                                    \
    {"attention", CLI_FLAG_CHOICE, &(options).attention, 0, 0, cli_bench_attention_names,                  \
     "composed: matmul, softmax, dropout, matmul; fused: tile by tile, without the [B, H, T, T] scores " \
     "(the same function and dropout masks, other roundings)"}

/* What single flags cannot check: --heads divides --dim, the device exists. Writes the
 * device; 0, or prints one line naming the flag and returns 2 (a usage error). */
int cli_bench_model_check(const char *command, const cli_bench_model_options *options, gc_device *device);

/* gc_bench_setup_init with the text encoder the options describe (byte-level vocabulary,
 * BERT's post-norm layers, mean pooling over the mask, no projection) in `dtype`, or
 * gc_bench_setup_from_folder with --init's; weight packing as --weight-packing says. */
gc_status cli_bench_model_setup(gc_bench_setup *setup, const cli_bench_model_options *options, gc_dtype dtype,
                                gc_device device);

/* "dual encoder (dim 32, 2 layers, 4 heads, hidden 64, max length 16, dropout 0.1)", or
 * "pretrained models/minilm (tied, max length 64)", into buf. */
const char *cli_bench_model_describe(const cli_bench_model_options *options, char *buf, int size);

#endif
