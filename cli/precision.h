/* The --precision flag of train and the benchmarks: the dtype of the model's parameters and
 * activations (f32, or f16 / bf16 with f32 master weights in the optimizer and, for f16, loss
 * scaling; see docs/TRAIN.md). */
#ifndef GC_CLI_PRECISION_H
#define GC_CLI_PRECISION_H

#include "gradcache/gradcache.h"

enum { GC_PRECISION_F32, GC_PRECISION_F16, GC_PRECISION_BF16, GC_PRECISION_COUNT };
/* "f32", "f16", "bf16", NULL: the choices of a GC_FLAG_CHOICE flag, in the enum's order. */
extern const char *const gc_precision_names[];

gc_dtype gc_precision_dtype(int precision);
/* 0, or (after one line "gradcache COMMAND: --precision NAME: <why>") the usage exit status
 * when `device` cannot compute in that precision. */
int gc_precision_check_device(const char *command, int precision, gc_device device);
/* A comma-separated list of precisions ("f32,f16,bf16") into indices (each once, in the
 * order given): the count, or -1 after one line naming the flag. */
int gc_precision_list_parse(const char *command, const char *text, int indices[GC_PRECISION_COUNT]);

#endif
