/* The evaluation set of a run (see eval_set.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval_set.h"

const char *const gc_eval_measure_names[] = {"recall@1", "recall@10", "mrr", "ndcg@10", "recall@100", "mrr@10",
                                             "map@100", NULL};

/* Each kind's measures in the order the log writes them; the first decides by default. */
static const char *const pair_measures[] = {"mrr", "recall@1", "recall@10", NULL};
static const char *const beir_measures[] = {"ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100", NULL};

/* The BEIR split evaluated on: dev when the folder judges one, else test (BEIR's convention:
 * model selection on dev, which many of its sets lack). */
static const char *beir_split(const char *folder) {
    char *dev = gc_path_join(folder, "qrels/dev.tsv");
    bool has_dev = access(dev, F_OK) == 0;
    free(dev);
    return has_dev ? "dev" : "test";
}

static gc_status read_set(gc_eval_set *set, const char *path) {
    set->beir = gc_beir_is_folder(path);
    if (!set->beir) {
        set->name = gc_data_path(path, "dev");
        return gc_pairs_read(set->name, &set->pairs);
    }
    const char *split = beir_split(path);
    char qrels[32];
    snprintf(qrels, sizeof qrels, "qrels/%s.tsv", split);
    set->name = gc_path_join(path, qrels);
    return gc_beir_read(path, split, &set->data);
}

gc_status gc_eval_set_open(gc_eval_set *set, const gc_trainer_config *c) {
    *set = (gc_eval_set){.limit = c->eval_limit};
    gc_status status = read_set(set, c->eval_data);
    if (status != GC_OK) {
        gc_set_error(status, "--eval-data: %s", gc_last_error());
        gc_eval_set_free(set);
        return status;
    }
    const char *const *names = set->beir ? beir_measures : pair_measures;
    set->metric = -1;
    for (int i = 0; names[i] && set->metric < 0; i++)
        if (!c->eval_metric || strcmp(c->eval_metric, names[i]) == 0) set->metric = i;
    if (set->metric < 0) {
        gc_set_error(GC_ERR_CONFIG, "--eval-metric %s: %s is a %s (its measures: %s)", c->eval_metric, set->name,
                     set->beir ? "BEIR-format folder" : "pair file",
                     set->beir ? "ndcg@10, recall@10, recall@100, mrr@10, map@100" : "mrr, recall@1, recall@10");
        gc_eval_set_free(set);
        return GC_ERR_CONFIG;
    }
    return GC_OK;
}

/* The corpus rows encoded and scored at a time: what `gradcache eval --beir` takes by default
 * (one [1024, block] score matrix, 32 MiB). */
#define BEIR_BLOCK 8192

gc_status gc_eval_set_measure(gc_eval_set *set, gc_dual_encoder *model, int64_t batch, gc_eval_record *record) {
    const char *const *names = set->beir ? beir_measures : pair_measures;
    record->count = 0;
    while (names[record->count]) record->names[record->count] = names[record->count], record->count++;
    record->metric = set->metric;
    if (!set->beir) {
        int64_t count = set->limit && set->limit < set->pairs.count ? set->limit : set->pairs.count;
        gc_retrieval_metrics m;
        gc_status status = gc_retrieval_evaluate_pairs(model, &set->pairs, count, batch, &m);
        if (status != GC_OK) return status;
        double values[] = {m.mrr, m.recall_at_1, m.recall_at_10};
        memcpy(record->values, values, sizeof values);
        record->queries = m.queries;
        return GC_OK;
    }
    gc_beir_eval_options options = {.k = 100, .batch = batch, .block = BEIR_BLOCK, .limit = set->limit};
    gc_beir_result result = {0};
    gc_status status = gc_beir_evaluate(model, &set->data, &options, &result);
    if (status != GC_OK) return status;
    const gc_trec_measures *m = &result.mean;
    double values[] = {m->ndcg_at_10, m->recall_at_10, m->recall_at_100, m->mrr_at_10, m->map_at_100};
    memcpy(record->values, values, sizeof values);
    record->queries = result.queries;
    gc_beir_result_free(&result);
    return GC_OK;
}

const char *gc_eval_set_metric(const gc_eval_set *set) {
    return (set->beir ? beir_measures : pair_measures)[set->metric];
}

void gc_eval_set_free(gc_eval_set *set) {
    gc_pairs_free(&set->pairs);
    if (set->beir) gc_beir_free(&set->data);
    free(set->name);
    *set = (gc_eval_set){0};
}
