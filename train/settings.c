/* The settings of a run that its checkpoint keeps, "flag.<name>" under the gradcache program's
 * flag names (see train_state.h): a resumed run must share each of them. */
#include <stdio.h>

#include "gradcache/train.h"
#include "numbers.h"
#include "train_state.h"

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

/* "flag.data": each dataset's size and hash, in the list's order ("; " between them), so that a
 * resumed run refuses another list; with several, "flag.sampling". */
static void data_settings(const gc_trainer_config *c, const gc_train_data *data, gc_metadata *s) {
    char value[GC_MAX_DATASETS * 80] = ""; /* 80: more than one dataset's words take */
    for (int d = 0, used = 0; d < data->count; d++)
        used += snprintf(value + used, sizeof value - (size_t)used, "%s%lld examples with fnv1a %016llx",
                         d ? "; " : "", (long long)data->pairs[d].count,
                         (unsigned long long)pairs_hash(&data->pairs[d]));
    gc_metadata_set(s, "flag.data", "%s", value);
    if (data->count > 1)
        gc_metadata_set(s, "flag.sampling", "%s",
                        c->sampling == GC_SAMPLING_PROPORTIONAL ? "proportional" : "round-robin");
}

void gc_train_settings(const gc_trainer_config *c, const gc_train_data *data, gc_metadata *s) {
    data_settings(c, data, s);
    if (c->init) gc_metadata_set(s, "flag.init", "%s", c->init);
    else gc_metadata_set(s, "flag.model-size", "%s", gc_model_size_names[c->model_size]);
    gc_metadata_set(s, "flag.max-length", "%lld", (long long)c->max_length);
    gc_metadata_set(s, "flag.tied", "%s", yes_no(c->tied));
    /* another precision computes other numbers, and its checkpoint holds other tensors */
    gc_metadata_set(s, "flag.precision", "%s", gc_dtype_name(c->dtype));
    gc_metadata_set(s, "flag.batch-size", "%lld", (long long)c->batch_size);
    /* how a step is computed too: GradCache agrees with a plain step only to rounding */
    gc_metadata_set(s, "flag.gc", "%s", yes_no(c->gc));
    if (c->gc)
        gc_metadata_set(s, "flag.gc-chunk-size", "%lld,%lld", (long long)c->chunk_sizes[0],
                        (long long)c->chunk_sizes[1]);
    else
        gc_metadata_set(s, "flag.gc-chunk-size", "none");
    if (c->gc && c->chunk_tokens) gc_metadata_set(s, "flag.gc-chunk-tokens", "%lld", (long long)c->chunk_tokens);
    /* other chunks draw other dropout masks; recorded only when used, as the budget */
    if (c->gc && c->sort_lengths) gc_metadata_set(s, "flag.gc-sort-lengths", "yes");
    if (c->steps) gc_metadata_set(s, "flag.steps", "%lld", (long long)c->steps);
    else gc_metadata_set(s, "flag.epochs", "%lld", (long long)(c->epochs ? c->epochs : 1));
    char number[32];
    gc_metadata_set(s, "flag.lr", "%s", gc_format_exact(c->lr, number, sizeof number));
    gc_metadata_set(s, "flag.temperature", "%s", gc_format_exact(c->temperature, number, sizeof number));
    gc_metadata_set(s, "flag.hard-negatives", "%lld", (long long)c->hard_negatives);
    /* only when used: checkpoints of runs without them resume as they did */
    if (c->accumulate > 1) gc_metadata_set(s, "flag.accumulate", "%lld", (long long)c->accumulate);
    if (c->positives > 1) gc_metadata_set(s, "flag.positives", "%lld", (long long)c->positives);
    if (c->no_duplicates) gc_metadata_set(s, "flag.no-duplicates", "yes");
    char prefixes[GC_MATRYOSHKA_MAX_DIMS * 48] = "";
    for (int j = 0, used = 0; j < c->matryoshka_count; j++)
        used += snprintf(prefixes + used, sizeof prefixes - (size_t)used, "%s%lld:%s", j ? "," : "",
                         (long long)c->matryoshka_dims[j], gc_format_exact(c->matryoshka_weights[j], number, sizeof number));
    if (c->matryoshka_count) gc_metadata_set(s, "flag.matryoshka", "%s", prefixes);
    if (c->guide)
        gc_metadata_set(s, "flag.guide", "%s margin %s %s", c->guide, gc_format_exact(c->guide_margin, number, sizeof number),
                        c->guide_margin_strategy == GC_GIST_RELATIVE ? "relative" : "absolute");
    if (c->teacher_scores) {
        char weight[32], student[32], teacher[32];
        gc_metadata_set(s, "flag.distill", "%s %s weight %s temperatures %s %s", c->teacher_scores,
                        c->distill == GC_DISTILL_KL_DIV ? "kl" : "margin-mse",
                        gc_format_exact(c->distill_weight, weight, sizeof weight),
                        gc_format_exact(c->distill_temperatures[0], student, sizeof student),
                        gc_format_exact(c->distill_temperatures[1], teacher, sizeof teacher));
    }
    if (c->lora_r) { /* only when used, as --accumulate */
        gc_metadata_set(s, "flag.lora-r", "%lld", (long long)c->lora_r);
        gc_metadata_set(s, "flag.lora-alpha", "%s", gc_format_exact(c->lora_alpha, number, sizeof number));
        gc_metadata_set(s, "flag.lora-dropout", "%s", gc_format_exact(c->lora_dropout, number, sizeof number));
        gc_metadata_set(s, "flag.lora-targets", "%s", c->lora_targets);
    }
    gc_metadata_set(s, "flag.seed", "%lld", (long long)c->seed);
    gc_train_eval_settings(c, s);
}
