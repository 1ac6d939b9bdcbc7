/* gradcache encode: texts in (a file of lines, or standard input), embeddings out (safetensors
 * or TSV), with a model folder or a run's model (gc_text_lines_read, gc_encode_texts_with,
 * gc_embeddings_save: gradcache/train.h and gradcache/pretrained.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/clock.h"
#include "gradcache/device.h"
#include "gradcache/train.h"

#define SUMMARY                                                                                               \
    "Encodes texts, one per line of --input (standard input by default), with a model and writes their\n"     \
    "embeddings, in the input's order, to --output: a safetensors file holding one tensor \"embeddings\"\n"   \
    "[N, D] (f32), or with --format tsv a line of D tab-separated values per text (\"-\": standard output).\n" \
    "A prompt goes before every text as sentence-transformers' encode() writes it: --prompt TEXT as given,\n" \
    "or --prompt-name NAME, the folder's prompt of that name (config_sentence_transformers.json's\n"          \
    "\"prompts\", e.g. query or document); with neither, the prompt its \"default_prompt_name\" names, if any."

static const char *const format_names[] = {"safetensors", "tsv", NULL};
static const char *const tower_names[] = {"query", "passage", NULL};

typedef struct encode_flags {
    const char *model, *adapter, *input, *output;
    const char *prompt, *prompt_name; /* --prompt TEXT, --prompt-name NAME: at most one */
    int64_t batch_size, max_length, threads;
    int format, precision, device, tower, weight_packing;
    bool quiet;
} encode_flags;

#define fail(...) cli_fail("encode", __VA_ARGS__)

static int parse_flags(int argc, char **argv, encode_flags *f) {
    *f = (encode_flags){.input = "-", .batch_size = 32};
    cli_flag table[] = {
        {"model", CLI_FLAG_STRING, &f->model, 0, 0, NULL,
         "a model folder (config.json, model.safetensors, tokenizer.json), a run folder (of train --lora-r: its "
         "adapter/ over the base folder the adapter names) or a model file (required)"},
        CLI_ADAPTER_FLAG(f->adapter),
        {"input", CLI_FLAG_STRING, &f->input, 0, 0, NULL, "the texts, one per line (-: standard input)"},
        {"output", CLI_FLAG_STRING, &f->output, 0, 0, NULL, "where the embeddings go (required; -: standard output, tsv)"},
        {"format", CLI_FLAG_CHOICE, &f->format, 0, 0, format_names, "safetensors, or tsv"},
        {"batch-size", CLI_FLAG_INT, &f->batch_size, 1, 1 << 20, NULL, "texts per forward (taken in order of length)"},
        {"max-length", CLI_FLAG_INT, &f->max_length, 0, 1 << 20, NULL,
         "tokens per text, longer ones cut (0: a model folder's sentence_bert_config.json max_seq_length, else "
         "128; either at most the model's positions)"},
        {"prompt", CLI_FLAG_STRING, &f->prompt, 0, 0, NULL, "TEXT written before every text, as given"},
        {"prompt-name", CLI_FLAG_STRING, &f->prompt_name, 0, 0, NULL,
         "the folder's prompt NAME (config_sentence_transformers.json: query, document, ...) before every text "
         "(neither flag: its default_prompt_name's, if any)"},
        {"threads", CLI_FLAG_INT, &f->threads, 0, 1024, NULL, "CPU threads (0: GC_NUM_THREADS, or every core)"},
        {"precision", CLI_FLAG_CHOICE, &f->precision, 0, 0, cli_precision_names,
         "the model's dtype: f32, or f16 / bf16 (a model folder only); the embeddings are f32"},
        {"device", CLI_FLAG_CHOICE, &f->device, 0, 0, cli_device_choices, "where to encode (cuda: the first GPU)"},
        {"tower", CLI_FLAG_CHOICE, &f->tower, 0, 0, tower_names, "which tower of a dual (untied) model"},
        {"quiet", CLI_FLAG_BOOL, &f->quiet, 0, 0, NULL, "no progress on standard error"},
        CLI_WEIGHT_PACKING_FLAG(f->weight_packing),
    };
    int status = cli_flags_parse("encode", SUMMARY, table, (int)(sizeof table / sizeof *table), argc, argv, 2);
    if (status) return status;
    if (!f->model) return fail(2, "--model is required (a model folder, a run folder or a model file)");
    if (!f->output) return fail(2, "--output is required (a file, or - for standard output with --format tsv)");
    if (f->prompt && f->prompt_name)
        return fail(2, "--prompt and --prompt-name: one prompt, the text itself or the folder's prompt of a name");
    if (strcmp(f->output, "-") == 0 && f->format != GC_EMBEDDINGS_TSV)
        return fail(2, "--output -: standard output takes --format tsv only");
    if (f->precision != CLI_PRECISION_F32 && f->tower != 0)
        return fail(2, "--precision %s: a model folder has one tower, --tower is for a dual run's model",
                    cli_precision_names[f->precision]);
    return 0;
}

/* Progress on standard error: a redrawn line on a terminal, else a line every 10 seconds;
 * and the last line either way. Nothing for a single batch. */
typedef struct progress_line {
    bool terminal, shown;
    double start, last;
    int64_t batch;
} progress_line;

static void show_progress(void *context, int64_t done, int64_t count) {
    progress_line *p = context;
    double now = gc_seconds();
    bool last = done == count;
    if (count <= p->batch || (!last && now - p->last < (p->terminal ? 0.2 : 10))) return;
    p->last = now;
    p->shown = true;
    double rate = done / (now - p->start > 0 ? now - p->start : 1e-9);
    fprintf(stderr, "%sencoded %lld/%lld texts, %.1f texts/s%s", p->terminal ? "\r" : "", (long long)done,
            (long long)count, rate, p->terminal && !last ? "" : "\n");
    fflush(stderr);
}

/* The model of --model: a model folder or a LoRA run folder in --precision, or (f32) anything
 * gc_dual_encoder_load reads. */
static gc_status load_model(const encode_flags *f, gc_device device, gc_dual_encoder *model) {
    if (f->precision == CLI_PRECISION_F32) return gc_dual_encoder_load(f->model, f->max_length, device, model);
    gc_dtype dtype = cli_precision_dtype(f->precision);
    if (gc_is_lora_run(f->model)) return gc_dual_encoder_from_lora_run(model, f->model, f->max_length, dtype, device);
    return gc_dual_encoder_from_folder(model, f->model, f->max_length, dtype, device);
}

int cli_command_encode(int argc, char **argv) {
    encode_flags f;
    int status = parse_flags(argc, argv, &f);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    gc_device device;
    status = cli_device_from_flag("encode", f.device, &device);
    if (!status) status = cli_precision_check_device("encode", f.precision, device);
    if (status) return status;
    if (f.threads) gc_set_cpu_threads((int)f.threads);
    gc_set_weight_packing(f.weight_packing == CLI_PACKING_ON);
    gc_dual_encoder model = {0};
    gc_text_lines lines = {0};
    gc_tensor *embeddings = NULL;
    char *prompt = NULL;
    if (load_model(&f, device, &model) != GC_OK) {
        status = cli_fail_model("encode");
    } else if (f.adapter && gc_dual_encoder_add_adapter(&model, f.adapter) != GC_OK) {
        status = fail(1, "--adapter: %s", gc_last_error());
    } else if (gc_dual_encoder_choose_prompt(&model, f.prompt_name, f.prompt, &prompt) != GC_OK) {
        status = fail(gc_last_status() == GC_ERR_CONFIG ? 2 : 1, "%s%s", f.prompt_name ? "--prompt-name: " :
                      f.prompt ? "--prompt: " : "", gc_last_error());
    } else if (gc_text_lines_read(f.input, &lines) != GC_OK) {
        status = fail(1, "--input: %s", gc_last_error());
    } else if (lines.count == 0) {
        status = fail(1, "--input %s: no text to encode", f.input);
    } else {
        progress_line progress = {isatty(STDERR_FILENO), false, gc_seconds(), gc_seconds(), f.batch_size};
        gc_encode_options options = {.max_length = model.max_length, .batch = f.batch_size, .prompt = prompt,
                                     .progress = f.quiet ? NULL : show_progress, .progress_context = &progress};
        embeddings = gc_encode_texts_with(gc_dual_encoder_tower(&model, f.tower), model.tokenizer,
                                          (const char *const *)lines.texts, lines.count, &options);
        if (!embeddings) status = fail(1, "%s", gc_last_error());
        else if (gc_embeddings_save(f.output, embeddings, (gc_embeddings_format)f.format) != GC_OK)
            status = fail(1, "--output: %s", gc_last_error());
    }
    gc_tensor_release(embeddings);
    free(prompt);
    gc_text_lines_free(&lines);
    gc_dual_encoder_free(&model);
    return status;
}
