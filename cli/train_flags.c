/* The flags of gradcache train (see train_flags.h). */
#include <stdlib.h>

#include "device_flag.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/train.h"
#include "train/numbers.h"
#include "precision.h"
#include "train_flags.h"

#define SUMMARY                                                                                              \
    "Trains a dual text encoder (or one tied encoder with --tied) on query<TAB>positive pairs with the\n"     \
    "in-batch contrastive loss; --gc computes each step with Gradient Cache. Writes DIR/log.jsonl,\n"          \
    "DIR/checkpoint.safetensors (for --resume) and DIR/model.safetensors (for gradcache eval). With --init,\n" \
    "fine-tunes a pretrained BERT-family model (one encoder for both sides) and DIR is a model folder too:\n"  \
    "config.json, tokenizer.json and model.safetensors under Hugging Face's names."

#define DEFAULT_CHUNK_SIZE 8

const char *const gc_train_loss_names[] = {"auto", "tiled", "full", NULL};

/* --gc-chunk-size "N" (both sides) or "N,M" (queries, passages); 0 or the usage status. */
static int parse_chunk_sizes(const char *text, int64_t sizes[2]) {
    char *end;
    long long query = strtoll(text, &end, 10), passage = query;
    if (*end == ',') passage = strtoll(end + 1, &end, 10);
    if (*end || end == text || query < 1 || passage < 1 || query > INT32_MAX || passage > INT32_MAX)
        return gc_cli_fail("train", 2,
                           "--gc-chunk-size: expected N or N,M (positive integers: query rows, passage rows), got '%s'",
                           text);
    sizes[0] = query;
    sizes[1] = passage;
    return 0;
}

int gc_train_flags_parse(int argc, char **argv, gc_train_flags *f) {
    *f = (gc_train_flags){.out = "runs/latest",
                          .model_size = 1,
                          .max_length = 32,
                          .batch_size = 64,
                          .lr = 5e-4,
                          .temperature = 0.05,
                          .log_every = 10,
                          .save_every = 100,
                          .chunk_sizes = {DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_SIZE}};
    gc_flag table[] = {
        {"data", GC_FLAG_STRING, &f->data, 0, 0, NULL, "a pair file, or a folder holding train.tsv (required)"},
        {"out", GC_FLAG_STRING, &f->out, 0, 0, NULL, "the run folder (log, checkpoint, model)"},
        {"model-size", GC_FLAG_CHOICE, &f->model_size, 0, 0, gc_model_size_names, "the encoder preset"},
        {"init", GC_FLAG_STRING, &f->init, 0, 0, NULL,
         "start from a pretrained model folder (config.json, model.safetensors, tokenizer.json) instead of a preset"},
        {"max-length", GC_FLAG_INT, &f->max_length, 2, 4096, NULL,
         "tokens per text ([CLS] and UTF-8 bytes; with --init, WordPiece tokens with [CLS] and [SEP])"},
        {"precision", GC_FLAG_CHOICE, &f->precision, 0, 0, gc_precision_names,
         "parameters and activations: f32, or f16 / bf16 with f32 master weights (f16: loss scaling)"},
        {"tied", GC_FLAG_BOOL, &f->tied, 0, 0, NULL, "one encoder for queries and passages"},
        {"batch-size", GC_FLAG_INT, &f->batch_size, 1, 1 << 24, NULL, "examples per step"},
        {"gc", GC_FLAG_BOOL, &f->gc, 0, 0, NULL, "compute each step with Gradient Cache"},
        {"gc-chunk-size", GC_FLAG_STRING, &f->gc_chunk_size, 0, 0, NULL,
         "rows per chunk with --gc: N, or N,M for queries and passages (default 8)"},
        {"reduce-half", GC_FLAG_BOOL, &f->reduce_half, 0, 0, NULL,
         "data-parallel f16/bf16: average gradients in their own dtype (half the traffic) instead of f32"},
        {"device", GC_FLAG_CHOICE, &f->device, 0, 0, gc_device_flag_choices, "where to train (cuda: the first GPU)"},
        {"mem-limit", GC_FLAG_SIZE, &f->mem_limit, 0, 0, NULL,
         "a byte limit on the device's memory, e.g. 512M (default: GC_MEM_LIMIT's, else on the CPU 2/3 of the "
         "memory available at the start, shared by the processes of a launched run on this machine)"},
        {"steps", GC_FLAG_INT, &f->steps, 0, 1e12, NULL, "steps to train (0: as --epochs says)"},
        {"epochs", GC_FLAG_INT, &f->epochs, 0, 1e6, NULL,
         "epochs to train, each skipping the examples the batch size leaves over (0: one, unless --steps)"},
        {"lr", GC_FLAG_DOUBLE, &f->lr, 1e-12, 1, NULL,
         "AdamW's peak rate: linear warm-up over 10% of the steps, then linear decay to 0"},
        {"temperature", GC_FLAG_DOUBLE, &f->temperature, 1e-4, 100, NULL, "the contrastive loss's temperature"},
        {"loss", GC_FLAG_CHOICE, &f->loss, 0, 0, gc_train_loss_names,
         "with --gc, the loss's gradient: tiled (no batch x batch matrix), full, or auto (tiled above one tile of "
         "rows: 512 on the CPU, 4096 on a GPU)"},
        {"hard-negatives", GC_FLAG_INT, &f->hard_negatives, 0, 64, NULL,
         "negatives per example: the first N negative columns"},
        {"seed", GC_FLAG_INT, &f->seed, 0, 9007199254740992.0, NULL,
         "names the random streams: weights, dropout, data order"},
        {"log-every", GC_FLAG_INT, &f->log_every, 1, 1e12, NULL,
         "steps between progress lines when stderr is not a terminal"},
        {"save-every", GC_FLAG_INT, &f->save_every, 0, 1e12, NULL, "steps between checkpoints (0: only at the end)"},
        {"stop-after", GC_FLAG_INT, &f->stop_after, 0, 1e12, NULL,
         "stop after this step as if interrupted, checkpoint written, for --resume (0: never)"},
        {"resume", GC_FLAG_BOOL, &f->resume, 0, 0, NULL,
         "continue from DIR/checkpoint.safetensors (with the flags of the run that wrote it)"},
    };
    int status = gc_flags_parse("train", SUMMARY, table, (int)(sizeof table / sizeof *table), argc, argv, 2);
    if (status) return status;
    if (!f->data) return gc_cli_fail("train", 2, "--data is required (a pair file, or a folder holding train.tsv)");
    if (f->steps && f->epochs) return gc_cli_fail("train", 2, "--steps and --epochs cannot be used together");
    if (f->gc_chunk_size && !f->gc) return gc_cli_fail("train", 2, "--gc-chunk-size needs --gc");
    if (f->loss != GC_CONTRASTIVE_AUTO && !f->gc)
        return gc_cli_fail("train", 2, "--loss needs --gc (the plain step differentiates the full loss)");
    return f->gc_chunk_size ? parse_chunk_sizes(f->gc_chunk_size, f->chunk_sizes) : 0;
}

/* FNV-1a over every text of the pairs: a resumed run checks it trains on the same data. */
static uint64_t pairs_hash(const gc_pairs *pairs) {
    uint64_t hash = 0xCBF29CE484222325u;
    int64_t texts = pairs->count * (2 + pairs->negatives);
    for (int64_t i = 0; i < texts; i++)
        for (const unsigned char *c = (const unsigned char *)pairs->texts[i];; c++) {
            hash = (hash ^ *c) * 0x100000001B3u; /* the NUL too: it separates the texts */
            if (!*c) break;
        }
    return hash;
}

static const char *yes_no(bool value) { return value ? "yes" : "no"; }

void gc_train_flags_settings(const gc_train_flags *f, const gc_pairs *pairs, gc_metadata *s) {
    gc_metadata_set(s, "flag.data", "%lld examples with fnv1a %016llx", (long long)pairs->count,
                    (unsigned long long)pairs_hash(pairs));
    if (f->init) gc_metadata_set(s, "flag.init", "%s", f->init);
    else gc_metadata_set(s, "flag.model-size", "%s", gc_model_size_names[f->model_size]);
    gc_metadata_set(s, "flag.max-length", "%lld", (long long)f->max_length);
    gc_metadata_set(s, "flag.tied", "%s", yes_no(f->tied));
    /* another precision computes other numbers, and its checkpoint holds other tensors */
    gc_metadata_set(s, "flag.precision", "%s", gc_precision_names[f->precision]);
    gc_metadata_set(s, "flag.batch-size", "%lld", (long long)f->batch_size);
    /* how a step is computed too: GradCache agrees with a plain step only to rounding */
    gc_metadata_set(s, "flag.gc", "%s", yes_no(f->gc));
    if (f->gc)
        gc_metadata_set(s, "flag.gc-chunk-size", "%lld,%lld", (long long)f->chunk_sizes[0],
                        (long long)f->chunk_sizes[1]);
    else
        gc_metadata_set(s, "flag.gc-chunk-size", "none");
    if (f->steps) gc_metadata_set(s, "flag.steps", "%lld", (long long)f->steps);
    else gc_metadata_set(s, "flag.epochs", "%lld", (long long)(f->epochs ? f->epochs : 1));
    char number[32];
    gc_metadata_set(s, "flag.lr", "%s", gc_format_exact(f->lr, number, sizeof number));
    gc_metadata_set(s, "flag.temperature", "%s", gc_format_exact(f->temperature, number, sizeof number));
    gc_metadata_set(s, "flag.hard-negatives", "%lld", (long long)f->hard_negatives);
    gc_metadata_set(s, "flag.seed", "%lld", (long long)f->seed);
}
