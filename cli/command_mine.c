/* gradcache mine: hard negatives mined with a model (gc_mine_pairs, gradcache/train.h), as
 * sentence-transformers' mine_hard_negatives mines them, written as a pair file with negative
 * columns that `train --hard-negatives N` reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/train.h"

#define SUMMARY                                                                                              \
    "Mines hard negatives with a model: encodes each distinct query and every distinct candidate (the\n"    \
    "positives, and a BEIR folder's corpus), ranks the candidates by exact search, skips the query's\n"     \
    "positives (and texts equal to one), filters and samples as sentence-transformers' mine_hard_negatives\n" \
    "does, and writes `query<TAB>positive<TAB>negative...` lines (docs/DATA.md); a query with too few\n"    \
    "candidates left loses its lines. Progress on stderr, a summary on stdout."

typedef struct mine_flags {
    const char *model, *data, *split, *out;
    int64_t negatives, range_min, range_max, seed, batch_size, block, max_length;
    double margin, relative_margin, max_score;
    int sampling, device;
} mine_flags;

static const char *const sampling_names[] = {"top", "random", NULL};

#define fail(...) cli_fail("mine", __VA_ARGS__)

static int parse_flags(int argc, char **argv, mine_flags *f) {
    *f = (mine_flags){.split = "train", .negatives = 3, .batch_size = 256, .block = 8192, .margin = NAN,
                      .relative_margin = NAN, .max_score = NAN};
    cli_flag table[] = {
        {"model", CLI_FLAG_STRING, &f->model, 0, 0, NULL,
         "a run folder, a model folder (as eval --model takes it) or a model file (required)"},
        {"data", CLI_FLAG_STRING, &f->data, 0, 0, NULL,
         "a pair file, a folder holding SPLIT.tsv, or a BEIR-format folder (its qrels SPLIT, its corpus as "
         "candidates too) (required)"},
        {"split", CLI_FLAG_STRING, &f->split, 0, 0, NULL, "the file of a --data folder, or the qrels of a BEIR one"},
        {"out", CLI_FLAG_STRING, &f->out, 0, 0, NULL, "the pair file to write (required)"},
        {"num-negatives", CLI_FLAG_INT, &f->negatives, 1, 1 << 16, NULL, "negatives per line"},
        {"range-min", CLI_FLAG_INT, &f->range_min, 0, 1 << 24, NULL, "skip this many best candidates left"},
        {"range-max", CLI_FLAG_INT, &f->range_max, 0, 1 << 24, NULL,
         "take negatives from the candidates left ranked below this (0: range-min + num-negatives, times 10 with a "
         "filter, + the most positives of a query)"},
        {"margin", CLI_FLAG_DOUBLE, &f->margin, -2, 2, NULL,
         "keep a candidate only if its score <= the query's lowest positive score - margin (off unless given)"},
        {"relative-margin", CLI_FLAG_DOUBLE, &f->relative_margin, -1, 2, NULL,
         "keep a candidate only if its score <= the lowest positive score x (1 - relative margin) (off unless given)"},
        {"max-score", CLI_FLAG_DOUBLE, &f->max_score, -1, 1, NULL,
         "keep a candidate only if its score <= this (off unless given)"},
        {"sampling", CLI_FLAG_CHOICE, &f->sampling, 0, 0, sampling_names,
         "top: the best candidates left; random: drawn among them (reproducible from --seed)"},
        {"seed", CLI_FLAG_INT, &f->seed, 0, 9007199254740992.0, NULL, "the seed of --sampling random"},
        {"batch-size", CLI_FLAG_INT, &f->batch_size, 1, 1 << 24, NULL, "texts encoded at a time"},
        {"block", CLI_FLAG_INT, &f->block, 1, 1 << 24, NULL,
         "candidates encoded and scored at a time (bounds the memory of the search)"},
        {"max-length", CLI_FLAG_INT, &f->max_length, 0, 1 << 20, NULL,
         "tokens per text for a model folder (0: its sentence_bert_config.json max_seq_length, else 128; at most its "
         "positions)"},
        {"device", CLI_FLAG_CHOICE, &f->device, 0, 0, cli_device_choices, "where to encode (cuda: the first GPU)"},
    };
    int status = cli_flags_parse("mine", SUMMARY, table, (int)(sizeof table / sizeof *table), argc, argv, 2);
    if (status) return status;
    if (!f->model) return fail(2, "--model is required (a run folder or a model folder)");
    if (!f->data)
        return fail(2, "--data is required (a pair file, a folder holding %s.tsv, or a BEIR folder)", f->split);
    if (!f->out) return fail(2, "--out is required (the pair file to write)");
    if (f->range_max && f->range_max < f->range_min + f->negatives)
        return fail(2, "--range-max %lld: leaves fewer than --num-negatives %lld ranks after --range-min %lld",
                    (long long)f->range_max, (long long)f->negatives, (long long)f->range_min);
    return 0;
}

static void print_progress(void *user, int64_t done, int64_t total) {
    (void)user;
    fprintf(stderr, "gradcache mine: candidates %lld/%lld encoded and searched\n", (long long)done, (long long)total);
}

/* The pairs of --data, and a BEIR folder's corpus in *beir (zeroed otherwise). */
static int read_data(const mine_flags *f, gc_pairs *pairs, gc_beir *beir) {
    if (gc_beir_is_folder(f->data)) {
        if (gc_beir_read(f->data, f->split, beir) != GC_OK || gc_beir_pairs(beir, f->data, pairs) != GC_OK)
            return fail(1, "--data: %s", gc_last_error());
        return 0;
    }
    char *name = NULL;
    int status = gc_dataset_pairs_read(f->data, f->split, pairs, &name) == GC_OK
                     ? 0
                     : fail(1, "--data: %s", gc_last_error());
    free(name);
    return status;
}

static int mine(const mine_flags *f, gc_dual_encoder *model, const gc_pairs *pairs, const gc_beir *beir) {
    gc_mine_options options = gc_mine_options_default();
    options.negatives = f->negatives, options.range_min = f->range_min, options.range_max = f->range_max;
    options.margin = f->margin, options.relative_margin = f->relative_margin, options.max_score = f->max_score;
    options.sampling = f->sampling ? GC_MINE_RANDOM : GC_MINE_TOP, options.seed = (uint64_t)f->seed;
    options.batch = f->batch_size, options.block = f->block, options.progress = print_progress;
    gc_mined mined;
    int64_t too_long = 0;
    if (gc_mine_pairs(model, pairs, (const char *const *)beir->corpus.texts, beir->corpus.count, &options, &mined) !=
        GC_OK)
        return fail(1, "%s", gc_last_error());
    int status = 0;
    if (mined.kept == 0) status = fail(1, "no line got %lld negatives: widen --range-max or loosen the filters",
                                       (long long)f->negatives);
    else if (gc_mined_save(f->out, pairs, &mined, &too_long) != GC_OK) status = fail(1, "--out: %s", gc_last_error());
    else {
        char left_out[96] = "";
        if (too_long)
            snprintf(left_out, sizeof left_out, "; %lld left out, longer than a pair file's line", (long long)too_long);
        printf("mined %lld negatives for %lld of %lld lines (%lld distinct queries, %lld candidates)%s into %s\n",
               (long long)f->negatives, (long long)(mined.kept - too_long), (long long)mined.lines,
               (long long)mined.queries, (long long)mined.corpus, left_out, f->out);
    }
    gc_mined_free(&mined);
    return status;
}

int cli_command_mine(int argc, char **argv) {
    mine_flags f;
    int status = parse_flags(argc, argv, &f);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    gc_device device;
    status = cli_device_from_flag("mine", f.device, &device);
    if (status) return status;
    gc_pairs pairs = {0};
    gc_beir beir = {0};
    gc_dual_encoder model = {0};
    status = read_data(&f, &pairs, &beir);
    if (status == 0 && gc_dual_encoder_load(f.model, f.max_length, device, &model) != GC_OK)
        status = fail(1, "--model: %s", gc_last_error());
    if (status == 0) status = mine(&f, &model, &pairs, &beir);
    gc_dual_encoder_free(&model);
    gc_pairs_free(&pairs);
    gc_beir_free(&beir);
    return status;
}
