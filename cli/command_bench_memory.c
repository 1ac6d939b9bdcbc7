/* gradcache bench memory: the peak memory of one training step against the batch size, for
 * the plain step and for GradCache at several chunk sizes; a table, a CSV file and an SVG
 * chart. Under a memory limit, a run that does not fit is a result, not a failure. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_commands.h"
#include "flags.h"
#include "gradcache/files.h"
#include "gradcache/train.h"
#include "int_list.h"

/* --loss: which contrastive loss GradCache's loss phase runs */
static const char *const loss_choices[] = {"tiled", "full", "both", NULL};
enum { LOSS_TILED, LOSS_FULL, LOSS_BOTH };

typedef struct memory_options {
    const char *batches, *chunks, *csv, *svg;
    size_t mem_limit;
    int64_t reps, warmup;
    int precision; /* CLI_PRECISION_*: the model's dtype */
    int loss; /* an index into loss_choices */
} memory_options;

/* The batch sizes of the plain step: the batches asked for and the chunk sizes, so that
 * every chunk size has the plain step of its own size to compare with. 0, or 2 after printing
 * why (too many sizes). */
static int plain_batch_sizes(const cli_int_list *batches, const cli_int_list *chunks, cli_int_list *sizes) {
    *sizes = *batches;
    for (int c = 0; c < chunks->count; c++) {
        if (cli_int_list_insert(sizes, chunks->values[c]) != 0) {
            fprintf(stderr, "gradcache bench memory: --batches and --chunks: more than %d sizes together\n",
                    CLI_INT_LIST_MAX);
            return 2;
        }
    }
    return 0;
}

/* The runs in the order they are measured: for each batch size the plain step, then, when
 * the batch was asked for, GradCache at each chunk size up to the batch with each loss. */
static int plan_rows(const cli_int_list *batches, const cli_int_list *plain_batches, const cli_int_list *chunks,
                     int loss, cli_memory_row *rows) {
    int count = 0;
    gc_contrastive_method losses[2] = {loss == LOSS_FULL ? GC_CONTRASTIVE_FULL : GC_CONTRASTIVE_TILED,
                                       GC_CONTRASTIVE_FULL};
    int n_losses = loss == LOSS_BOTH ? 2 : 1;
    for (int b = 0; b < plain_batches->count; b++) {
        int64_t batch = plain_batches->values[b];
        rows[count++] = (cli_memory_row){.plain = true, .batch = batch, .chunk = batch, .loss = GC_CONTRASTIVE_FULL};
        bool asked = false;
        for (int i = 0; i < batches->count; i++) asked |= batches->values[i] == batch;
        for (int c = 0; asked && c < chunks->count && chunks->values[c] <= batch; c++)
            for (int l = 0; l < n_losses; l++)
                rows[count++] = (cli_memory_row){.batch = batch, .chunk = chunks->values[c], .loss = losses[l]};
    }
    return count;
}

static void print_row(const cli_memory_row *row, const cli_memory_row *plain) {
    printf("  %-6s %7lld %7lld %-5s", row->plain ? "plain" : "gc", (long long)row->batch, (long long)row->chunk,
           cli_memory_loss_name(row->loss));
    if (row->result.status != GC_OK) {
        printf("   does not fit (%s)\n", gc_status_name(row->result.status));
        return;
    }
    char peak[32], cache[32], packed[32];
    printf(" %14zu %12s %12s %12s %10.1f", row->result.peak_bytes,
           gc_format_bytes((double)row->result.peak_bytes, peak, 32),
           gc_format_bytes((double)row->result.cache_bytes, cache, 32),
           gc_format_bytes((double)row->result.packed_bytes, packed, 32), row->result.step_ms);
    if (!row->plain && plain && plain->result.status == GC_OK)
        printf(" %12.3f", (double)row->result.peak_bytes / (double)plain->result.peak_bytes);
    putchar('\n');
}

/* Writes one output through a temporary file; 0, or 1 after printing why. */
static int write_output(const char *path, const cli_memory_row *rows, int count, const char *const titles[2],
                        size_t limit, bool svg) {
    gc_file_writer out;
    gc_status status = gc_file_begin(&out, path);
    if (status == GC_OK) {
        if (svg) cli_memory_rows_write_svg(out.file, rows, count, titles[0], titles[1], limit);
        else cli_memory_rows_write_csv(out.file, rows, count);
        status = gc_file_commit(&out);
    }
    if (status == GC_OK) return 0;
    fprintf(stderr, "gradcache bench memory: %s\n", gc_last_error());
    return 1;
}

/* Fails early, before any measurement, when an output cannot be created where asked. */
static int check_output(const char *flag, const char *path) {
    gc_file_writer out;
    if (!path) return 0;
    if (gc_file_begin(&out, path) != GC_OK) {
        fprintf(stderr, "gradcache bench memory: --%s: %s\n", flag, gc_last_error());
        return 2;
    }
    gc_file_abort(&out);
    return 0;
}

/* The allocator's count against the driver's: what the allocator holds (live + cached +
 * workspace) and what cudaMemGetInfo says is in use, which adds the CUDA context, the loaded
 * kernels and anything allocated outside the library. */
static void print_driver_check(gc_device device) {
    gc_memory_stats stats = gc_memory_get_stats(device);
    size_t free_bytes, total_bytes;
    gc_memory_device_info(device, &free_bytes, &total_bytes);
    char reserved[32], workspace[32], used[32], total[32];
    printf("driver check: the allocator holds %s (%zu bytes, workspace %s); the driver has %s of %s in use "
           "(cudaMemGetInfo: context and kernels included)\n",
           gc_format_bytes((double)stats.reserved_bytes, reserved, 32), stats.reserved_bytes,
           gc_format_bytes((double)stats.workspace_bytes, workspace, 32),
           gc_format_bytes((double)(total_bytes - free_bytes), used, 32), gc_format_bytes((double)total_bytes, total, 32));
}

static int sweep(const memory_options *options, const cli_bench_model_options *model, gc_device device,
                 cli_memory_row *rows, int count) {
    if (options->mem_limit) gc_memory_set_limit(device, options->mem_limit);
    size_t limit = gc_memory_get_stats(device).limit_bytes; /* --mem-limit, or GC_MEM_LIMIT */
    gc_bench_setup setup;
    if (cli_bench_model_setup(&setup, model, cli_precision_dtype(options->precision), device) != GC_OK) {
        fprintf(stderr, "gradcache bench memory: the model alone does not fit: %s\n", gc_last_error());
        return 1;
    }
    char model_text[200], device_text[16], limit_text[32], title[160];
    gc_device_str(device, device_text, sizeof device_text);
    printf("gradcache bench memory: %s, %lld parameters in %s, %s, %s, step time: median of %lld\n",
           cli_bench_model_describe(model, model_text, sizeof model_text),
           (long long)gc_param_list_numel(&setup.model.params), cli_precision_names[options->precision], device_text,
           limit ? gc_format_bytes((double)limit, limit_text, 32) : "no memory limit", (long long)options->reps);
    printf("  %-6s %7s %7s %-5s %14s %12s %12s %12s %10s %12s\n", "mode", "batch", "chunk", "loss", "peak bytes",
           "peak", "cache", "packed", "step ms", "peak/plain");
    snprintf(title, sizeof title, "Peak memory of one training step, plain and GradCache (%s, %s)", device_text,
             cli_precision_names[options->precision]);
    const char *titles[2] = {title, model_text};
    int status = 0;
    const cli_memory_row *plain = NULL;
    for (int i = 0; i < count && status == 0; i++) {
        setup.loss.method = rows[i].loss;
        rows[i].result = gc_bench_measure(&setup, rows[i].batch, rows[i].plain ? 0 : rows[i].chunk,
                                          (int)options->warmup, (int)options->reps);
        gc_status result = rows[i].result.status;
        if (result != GC_OK && result != GC_ERR_MEM_LIMIT && result != GC_ERR_OUT_OF_MEMORY) {
            fprintf(stderr, "gradcache bench memory: batch %lld: %s\n", (long long)rows[i].batch, gc_last_error());
            status = 1;
        }
        gc_clear_error();
        if (rows[i].plain) plain = &rows[i];
        print_row(&rows[i], plain);
        fflush(stdout);
        /* the CSV rewritten after every run, so that a sweep cut short (a time limit) keeps
         * the runs it finished */
        if (status == 0 && options->csv) status = write_output(options->csv, rows, i + 1, titles, limit, false);
    }
    gc_bench_setup_free(&setup);
    if (device.type == GC_DEVICE_CUDA) print_driver_check(device);
    if (status == 0 && options->svg) status = write_output(options->svg, rows, count, titles, limit, true);
    return status;
}

int cli_command_bench_memory(int argc, char **argv) {
    memory_options options = {.batches = "16,64,256,1024", .chunks = "16,64", .reps = 1, .loss = LOSS_TILED};
    cli_bench_model_options model = {.dim = 32, .layers = 2, .heads = 4, .hidden = 64, .max_length = 16, .dropout = 0.1};
    cli_flag flags[] = {
        {"batches", CLI_FLAG_STRING, &options.batches, 0, 0, NULL, "batch sizes, comma-separated"},
        {"chunks", CLI_FLAG_STRING, &options.chunks, 0, 0, NULL, "GradCache chunk sizes, comma-separated"},
        {"mem-limit", CLI_FLAG_SIZE, &options.mem_limit, 0, 0, NULL, "device memory limit, e.g. 64M (runs above it do not fit)"},
        {"csv", CLI_FLAG_STRING, &options.csv, 0, 0, NULL, "write the results as CSV to this file (after every run)"},
        {"svg", CLI_FLAG_STRING, &options.svg, 0, 0, NULL, "draw the results as an SVG chart in this file"},
        {"reps", CLI_FLAG_INT, &options.reps, 1, GC_BENCH_MAX_REPS, NULL, "measured steps per run (median time)"},
        {"warmup", CLI_FLAG_INT, &options.warmup, 0, 100, NULL, "unmeasured steps before them"},
        {"precision", CLI_FLAG_CHOICE, &options.precision, 0, 0, cli_precision_names,
         "the model's parameters and activations (f16 and bf16: 16-bit storage)"},
        {"loss", CLI_FLAG_CHOICE, &options.loss, 0, 0, loss_choices,
         "GradCache's loss: tiled (no B x B matrix), full (the B x B scores and their gradient), or both"},
        CLI_BENCH_MODEL_FLAGS(model),
    };
    int parsed = cli_flags_parse("bench memory",
                                 "Peak memory and time of one training step against the batch size: the plain step\n"
                                 "(the whole batch in one graph) and Gradient Cache at each chunk size, with the tiled\n"
                                 "contrastive loss or the full one. The cache column is GradCache's representations\n"
                                 "and their gradients; packed, the weights' kept GEMM panels (outside the peak, under\n"
                                 "the limit). Synthetic texts.",
                                 flags, (int)(sizeof flags / sizeof *flags), argc, argv, 3);
    if (parsed) return parsed == 1 ? 0 : parsed;
    cli_int_list batches, chunks, plain_batches;
    gc_device device;
    int usage = cli_int_list_parse("bench memory", "batches", options.batches, 1, 1 << 20, &batches);
    if (!usage) usage = cli_int_list_parse("bench memory", "chunks", options.chunks, 1, 1 << 20, &chunks);
    if (!usage) usage = plain_batch_sizes(&batches, &chunks, &plain_batches);
    if (!usage) usage = cli_bench_model_check("bench memory", &model, &device);
    if (!usage) usage = cli_precision_check_device("bench memory", options.precision, device);
    if (!usage) usage = check_output("csv", options.csv);
    if (!usage) usage = check_output("svg", options.svg);
    if (usage) return usage;
    cli_memory_row *rows = malloc((size_t)(plain_batches.count * (1 + 2 * chunks.count)) * sizeof *rows);
    if (!rows) gc_fatal("bench memory: out of host memory");
    int count = plan_rows(&batches, &plain_batches, &chunks, options.loss, rows);
    int status = sweep(&options, &model, device, rows, count);
    free(rows);
    return status;
}
