/* The flags of `gradcache train`, and the settings among them that a resumed run must share
 * with the run that wrote its checkpoint. */
#ifndef GC_CLI_TRAIN_FLAGS_H
#define GC_CLI_TRAIN_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/metadata.h"
#include "gradcache/train.h"

/* --loss: how a --gc step computes the loss's gradient, in gc_contrastive_method's order. */
extern const char *const gc_train_loss_names[];

typedef struct gc_train_flags {
    const char *data, *out, *gc_chunk_size, *init; /* init: a pretrained model folder, or NULL */
    int model_size, device;    /* indices into gc_model_size_names and gc_device_flag_choices */
    int precision;             /* GC_PRECISION_* (cli/precision.h) */
    int loss;                  /* an index into gc_train_loss_names: a gc_contrastive_method */
    int64_t max_length, batch_size, steps, epochs, hard_negatives, seed, log_every, save_every, stop_after;
    double lr, temperature;
    size_t mem_limit;
    bool tied, gc, resume;
    bool reduce_half;          /* data-parallel f16/bf16: reduce gradients in their dtype, not f32 */
    int64_t chunk_sizes[2];    /* --gc-chunk-size parsed: query, passage rows per chunk */
} gc_train_flags;

/* Parses train's flags (argv[2..]): 0; 1 after --help; or 2 after one line on stderr naming
 * the flag (unknown, malformed, out of range, or a combination that makes no sense). */
int gc_train_flags_parse(int argc, char **argv, gc_train_flags *flags);

/* Adds to `settings`, as "flag.<name>", every flag that decides what the run computes, with
 * the data's size and a hash of its texts as "flag.data". Where the run computes (--device,
 * --mem-limit), where it writes and how often it reports are left out: free to change. */
void gc_train_flags_settings(const gc_train_flags *flags, const gc_pairs *pairs, gc_metadata *settings);

#endif
