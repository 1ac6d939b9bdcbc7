/* The evaluation set of a run (--eval-data, gradcache/train.h): a pair set's dev pairs or a
 * BEIR-format folder's dev (else test) judgements, read once when the run is set up, and the
 * measures of a model on it. */
#ifndef GC_TRAIN_EVAL_SET_H
#define GC_TRAIN_EVAL_SET_H

#include "gradcache/train.h"

typedef struct gc_eval_set {
    bool beir;          /* a BEIR-format folder, else pairs */
    gc_pairs pairs;     /* pairs: the dev split */
    gc_beir data;       /* BEIR: corpus, queries and the split's judgements */
    char *name;         /* what was read (a file, or the BEIR folder's qrels file), for messages */
    int metric;         /* the index among the kind's measures of the one that decides the best */
    int64_t limit;      /* the first pairs or judged queries only (0: all) */
} gc_eval_set;

/* Reads config->eval_data and resolves config->eval_metric. GC_ERR_CONFIG naming --eval-metric
 * when it is no measure of that kind of set; else GC_ERR_IO or
 * GC_ERR_FORMAT naming the file, prefixed "--eval-data: ". Nothing is kept on failure. */
gc_status gc_eval_set_open(gc_eval_set *set, const gc_trainer_config *config);
/* The measures of `model` on the set into record->count, names, values, metric and queries;
 * `batch` texts encoded at a time (eval mode, no graph). */
gc_status gc_eval_set_measure(gc_eval_set *set, gc_dual_encoder *model, int64_t batch, gc_eval_record *record);
/* The name of the measure that decides the best ("ndcg@10", ...; a static string). */
const char *gc_eval_set_metric(const gc_eval_set *set);
void gc_eval_set_free(gc_eval_set *set);

#endif
