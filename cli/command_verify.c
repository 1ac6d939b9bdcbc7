/* gradcache verify: one GradCache step and one full-batch step on the same model, data and
 * dropout masks; the relative difference of every parameter's gradient, and a non-zero exit
 * above a tolerance. No dataset: the texts are synthetic (gc_synthetic_tokens, gradcache/measure.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_model.h"
#include "commands.h"
#include "gradcache/files.h"
#include "gradcache/measure.h"

/* A gradient norm below this fraction of the model's largest is measured against that
 * floor instead: some gradients are zero but for rounding (an attention key bias: softmax
 * ignores a shift shared by all keys; ~1e-12 of the largest norm here), and two roundings of
 * zero would otherwise differ by 100%. The smallest real gradients of these models (the
 * attention query and key weights at initialisation, 3e-5 to 1e-4 of the largest) are then
 * compared with a floor at most a few times their own norm: an error in them still shows. */
#define GC_VERIFY_FLOOR_FRACTION 1e-4

static const char *const dtype_names[] = {"f32", "f64", "f16", "bf16", NULL};
static const gc_dtype dtypes[] = {GC_F32, GC_F64, GC_F16, GC_BF16};
/* The default tolerances: a few hundred roundings of each dtype (sums of chunk gradients in
 * another order than the full batch's). */
static const double default_tolerances[] = {1e-5, 1e-10};

/* The default tolerance. f32 and f64: default_tolerances. f16 and bf16: (chunks + 1) u, u the
 * dtype's unit roundoff (2^-11, 2^-8). The two steps run the same 16-bit ops on the same values
 * but for two roundings: the cached step's representation gradient, the loss's f32 one rounded
 * to 16 bits once, and each parameter gradient summed chunk by chunk in 16 bits, one rounding
 * per chunk added (the plain step rounds each sum once). Measured: 1.4 u (f16) and 1.2 u (bf16)
 * at the defaults, 4 chunks; an f32 step would show 1e-7, and a step that lost a chunk's
 * gradient 1e-1. */
static double default_tolerance(gc_dtype dtype, int64_t batch_size, int64_t chunk_size) {
    int64_t chunks = (batch_size + chunk_size - 1) / chunk_size;
    switch (dtype) {
    case GC_F16: return (double)(chunks + 1) * 0x1p-11;
    case GC_BF16: return (double)(chunks + 1) * 0x1p-8;
    default: return default_tolerances[dtype == GC_F64];
    }
}

static double gradient_norm(const gc_tensor *grad) {
    int64_t numel = gc_numel(grad);
    double *values = malloc((size_t)numel * sizeof *values), sum = 0;
    if (!values) gc_fatal("verify: out of host memory for %lld values", (long long)numel);
    gc_to_host_f64(grad, values);
    for (int64_t i = 0; i < numel; i++) sum += values[i] * values[i];
    free(values);
    return sqrt(sum);
}

/* The largest parameter gradient norm of a full-batch step: the scale of the floor. */
static gc_status gradient_scale(gc_cache *cache, const gc_batch *inputs, const gc_param_list *params, double *scale) {
    double loss;
    gc_status status = gc_cache_full_batch_step(cache, inputs, &loss);
    *scale = 0;
    for (int i = 0; i < params->count && status == GC_OK; i++) {
        const gc_tensor *grad = gc_grad(params->items[i].tensor);
        double norm = grad ? gradient_norm(grad) : 0;
        if (norm > *scale) *scale = norm;
    }
    gc_param_list_zero_grad(params);
    return status;
}

static void print_differences(const gc_param_list *params, const double *relative, int *largest) {
    printf("  %-44s %-14s %s\n", "parameter", "shape", "relative difference");
    *largest = 0;
    for (int i = 0; i < params->count; i++) {
        const gc_tensor *tensor = params->items[i].tensor;
        char shape[64];
        printf("  %-44s %-14s %.3e\n", params->items[i].name, gc_shape_str(tensor->ndim, tensor->shape, shape, sizeof shape),
               relative[i]);
        if (relative[i] > relative[*largest]) *largest = i;
    }
}

/* --- --dot: the graphs each step back-propagates, side by side --- */

/* Which backwards of a step are drawn: each tower's first (the contrastive loss computes its
 * own gradient, so no graph of it is walked), and the loss's if one is. */
typedef struct drawing {
    FILE *out;
    const char *step; /* "plain" or "cached" */
    int calls;        /* backwards of the towers so far */
    int per_tower;    /* backwards per tower: 1 for the plain step, the chunks for the cached */
    gc_status status;
} drawing;

/* The cache's backward: draws the graph about to be walked when it is one of those, then
 * walks it as gc_backward does. */
static gc_status draw_then_backward(gc_tensor *output, gc_tensor *seed, void *user) {
    drawing *d = user;
    bool loss = gc_numel(output) == 1; /* a loss is a scalar; a tower's output is [rows, dim] */
    int call = loss ? -1 : d->calls++;
    if (d->status == GC_OK && (loss || call % d->per_tower == 0)) {
        char id[32], label[160];
        snprintf(id, sizeof id, "%s%s%d", d->step, loss ? "_loss" : "", call + 1);
        if (loss) snprintf(label, sizeof label, "%s step: the loss", d->step);
        else snprintf(label, sizeof label, "%s step: the %s tower%s", d->step,
                      call / d->per_tower ? "passage" : "query",
                      d->per_tower > 1 ? ", its first chunk" : ", the whole batch");
        d->status = gc_autograd_write_dot_cluster(d->out, id, label, &output, 1);
    }
    return gc_backward(&output, seed ? &seed : NULL, 1);
}

/* One plain and one cached step with every graph of interest written to `path` as DOT. */
static gc_status write_graphs(gc_bench_setup *setup, const gc_bench_batch *batch, int64_t batch_size,
                              int64_t chunk_size, const char *path) {
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status != GC_OK) return status;
    fprintf(writer.file, "digraph verify {\n  rankdir=BT;\n  node [fontname=\"monospace\", fontsize=10];\n"
                         "  edge [fontname=\"monospace\", fontsize=9];\n");
    drawing plain = {writer.file, "plain", 0, 1, GC_OK};
    drawing cached = {writer.file, "cached", 0, (int)((batch_size + chunk_size - 1) / chunk_size), GC_OK};
    drawing *steps[2] = {&plain, &cached};
    for (int s = 0; s < 2 && status == GC_OK; s++) {
        gc_cache_config config = gc_bench_cache_config(setup, chunk_size);
        config.backward = draw_then_backward;
        config.user = steps[s];
        gc_cache *cache = gc_cache_new(&config);
        double loss;
        status = s ? gc_cache_step(cache, batch->inputs, &loss, NULL)
                   : gc_cache_full_batch_step(cache, batch->inputs, &loss);
        if (status == GC_OK) status = steps[s]->status;
        gc_cache_free(cache);
        gc_param_list_zero_grad(&setup->model.params);
    }
    fprintf(writer.file, "}\n");
    if (status != GC_OK) {
        gc_file_abort(&writer);
        return status;
    }
    return gc_file_commit(&writer);
}

static int run(const cli_bench_model_options *options, gc_dtype dtype, gc_device device, int64_t batch_size,
               int64_t chunk_size, double tolerance, const char *dot) {
    char model_text[200], device_text[16];
    printf("gradcache verify: %s, %s, %s, batch %lld in chunks of %lld, seed %lld\n",
           cli_bench_model_describe(options, model_text, sizeof model_text), gc_dtype_name(dtype),
           gc_device_str(device, device_text, sizeof device_text), (long long)batch_size, (long long)chunk_size,
           (long long)options->seed);
    gc_bench_setup setup;
    gc_bench_batch batch;
    if (cli_bench_model_setup(&setup, options, dtype, device) != GC_OK) {
        fprintf(stderr, "gradcache verify: the model: %s\n", gc_last_error());
        return 1;
    }
    gc_status status = gc_bench_batch_make(&setup, batch_size, &batch);
    double largest_relative = 0;
    double *relative = calloc((size_t)setup.model.params.count, sizeof *relative);
    if (!relative) gc_fatal("verify: out of host memory for %d parameters", setup.model.params.count);
    double scale = 0;
    if (status == GC_OK) {
        gc_cache_config config = gc_bench_cache_config(&setup, chunk_size);
        gc_cache *cache = gc_cache_new(&config);
        status = gradient_scale(cache, batch.inputs, &setup.model.params, &scale);
        if (status == GC_OK)
            status = gc_cache_verify(cache, batch.inputs, GC_VERIFY_FLOOR_FRACTION * scale, &largest_relative,
                                     relative, setup.model.params.count);
        gc_cache_free(cache);
    }
    int exit_status = 1;
    if (status != GC_OK) {
        fprintf(stderr, "gradcache verify: %s\n", gc_last_error());
    } else {
        int largest;
        printf("largest gradient norm %.3e: norms below %.3e are compared with that floor\n", scale,
               GC_VERIFY_FLOOR_FRACTION * scale);
        print_differences(&setup.model.params, relative, &largest);
        bool ok = largest_relative <= tolerance;
        printf("largest relative difference %.3e (%s), tolerance %.3e: %s\n", largest_relative,
               setup.model.params.items[largest].name, tolerance, ok ? "ok" : "ABOVE THE TOLERANCE");
        exit_status = ok ? 0 : 1;
    }
    if (exit_status == 0 && dot) {
        if (write_graphs(&setup, &batch, batch_size, chunk_size, dot) == GC_OK) {
            printf("the graphs of a plain and a cached step are in %s (dot -Tsvg %s -o graphs.svg)\n", dot, dot);
        } else {
            fprintf(stderr, "gradcache verify: --dot %s: %s\n", dot, gc_last_error());
            exit_status = 1;
        }
    }
    free(relative);
    gc_bench_batch_free(&batch);
    gc_bench_setup_free(&setup);
    return exit_status;
}

int cli_command_verify(int argc, char **argv) {
    cli_bench_model_options model = {.dim = 32, .layers = 2, .heads = 4, .hidden = 64, .max_length = 32, .dropout = 0.1};
    int64_t batch_size = 32, chunk_size = 8;
    int dtype = 0;
    double tolerance = -1;
    const char *dot = NULL;
    cli_flag flags[] = {
        {"batch-size", CLI_FLAG_INT, &batch_size, 1, 1 << 20, NULL, "query/passage pairs in the step"},
        {"chunk-size", CLI_FLAG_INT, &chunk_size, 1, 1 << 20, NULL, "rows per GradCache chunk"},
        {"dtype", CLI_FLAG_CHOICE, &dtype, 0, 0, dtype_names, "parameters and activations"},
        {"tolerance", CLI_FLAG_DOUBLE, &tolerance, -1, 1e300, NULL,
         "largest relative difference allowed; negative: 1e-5 for f32, 1e-10 for f64, and for f16 and bf16 "
         "(chunks + 1) u, u their unit roundoff (2^-11, 2^-8), chunks = batch size / chunk size rounded up (each "
         "chunk's gradient is added in 16 bits: one rounding each, and one of the representations' gradient)"},
        {"dot", CLI_FLAG_STRING, &dot, 0, 0, NULL,
         "then write the graphs of one plain and one cached step to this file as Graphviz DOT: each step's loss, "
         "and each tower's whole batch (plain) or first chunk (cached)"},
        CLI_BENCH_MODEL_FLAGS(model),
    };
    int parsed = cli_flags_parse("verify",
                                 "Runs one Gradient Cache step and one full-batch step (same model, data and dropout masks)\n"
                                 "and prints ||g_cache - g_full|| / ||g_full|| for every parameter tensor; exits 1 when the\n"
                                 "largest is above the tolerance.",
                                 flags, (int)(sizeof flags / sizeof *flags), argc, argv, 2);
    if (parsed) return parsed == 1 ? 0 : parsed;
    gc_device device;
    int usage = cli_bench_model_check("verify", &model, &device);
    if (usage) return usage;
    return run(&model, dtypes[dtype], device, batch_size, chunk_size,
               tolerance < 0 ? default_tolerance(dtypes[dtype], batch_size, chunk_size) : tolerance, dot);
}
