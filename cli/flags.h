/* Command-line flags: a table per subcommand, parsed strictly (unknown flags, missing or
 * malformed values and values out of range are errors naming the flag; a number is the
 * number alone, without white space or a '+'), and the same table prints the subcommand's
 * --help. */
#ifndef CLI_FLAGS_H
#define CLI_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/device.h"
#include "gradcache/dtype.h"
#include "gradcache/tensor.h" /* gc_set_weight_packing, which --weight-packing sets */

typedef enum cli_flag_kind {
    CLI_FLAG_BOOL,   /* --name (no value) sets *(bool *)value */
    CLI_FLAG_INT,    /* int64_t in [min, max], compared as integers (bounds: integers up to 2^53) */
    CLI_FLAG_DOUBLE, /* double in [min, max], finite */
    CLI_FLAG_STRING, /* const char * (points into argv) */
    CLI_FLAG_SIZE,   /* size_t bytes: "512M", "2G" (gc_parse_size), at least 1: 0 is no value */
    CLI_FLAG_CHOICE  /* one of `choices` (a NULL-terminated list); *(int *)value = its index */
} cli_flag_kind;

typedef struct cli_flag {
    const char *name;  /* without the leading "--" (a one-letter name is also "-x") */
    cli_flag_kind kind;
    void *value;       /* where the parsed value goes; holds the default before parsing */
    double min, max;   /* INT and DOUBLE */
    const char *const *choices; /* CHOICE */
    const char *help;  /* one line */
} cli_flag;

/* Parses argv[first..argc) against flags[0..count). Positional arguments are refused.
 * Returns 0, or prints one line "gradcache <command>: <problem>" to stderr and returns 2
 * (the exit status of a usage error). --help prints the usage and returns 1 (exit 0). */
int cli_flags_parse(const char *command, const char *summary, cli_flag *flags, int count, int argc, char **argv,
                    int first);
void cli_flags_usage(const char *command, const char *summary, const cli_flag *flags, int count, FILE *out);

/* The --device flag of the commands that compute: "cpu", or "cuda" for the first GPU. */
enum { CLI_DEVICE_CPU, CLI_DEVICE_CUDA };
/* The choices of a CLI_FLAG_CHOICE flag, in the order of the enum above. */
extern const char *const cli_device_choices[];

/* The device `choice` names: 0, or (after one line naming --device, when no GPU is usable)
 * the usage exit status. */
int cli_device_from_flag(const char *command, int choice, gc_device *device);

/* The --weight-packing flag of the commands that multiply by weights: "on" (the default), a
 * weight keeps its GEMM panels packed between products (packed bytes, outside the peak, under
 * the limit), or "off", each product packs its own (gc_set_weight_packing; the same results
 * either way). Its choices, in the enum's order, and its table entry: */
enum { CLI_PACKING_ON, CLI_PACKING_OFF };
extern const char *const cli_packing_names[];
/* --adapter DIR of encode and eval: a PEFT LoRA adapter over --model's encoder */
#define CLI_ADAPTER_FLAG(path)                                                                                 \
    {"adapter", CLI_FLAG_STRING, &(path), 0, 0, NULL,                                                          \
     "a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors) applied over --model's encoder"}

#define CLI_WEIGHT_PACKING_FLAG(choice)                                                                        \
    {"weight-packing", CLI_FLAG_CHOICE, &(choice), 0, 0, cli_packing_names,                                    \
     "on: weights keep their packed GEMM panels between products (reported as packed bytes); off: each product " \
     "packs its own (less memory, slower; the same results)"}

/* The --precision flag of train and the benchmarks: the dtype of the model's parameters and
 * activations (f32, or f16 / bf16 with f32 master weights in the optimizer and, for f16, loss
 * scaling; see docs/TRAIN.md). */
enum { CLI_PRECISION_F32, CLI_PRECISION_F16, CLI_PRECISION_BF16, CLI_PRECISION_COUNT };
/* "f32", "f16", "bf16", NULL: the choices of a CLI_FLAG_CHOICE flag, in the enum's order. */
extern const char *const cli_precision_names[];

gc_dtype cli_precision_dtype(int precision);
/* 0, or (after one line "gradcache COMMAND: --precision NAME: <why>") the usage exit status
 * when `device` cannot compute in that precision. */
int cli_precision_check_device(const char *command, int precision, gc_device device);
/* A comma-separated list of precisions ("f32,f16,bf16") into indices (each once, in the
 * order given): the count, or -1 after one line naming the flag. */
int cli_precision_list_parse(const char *command, const char *text, int indices[CLI_PRECISION_COUNT]);

#endif
