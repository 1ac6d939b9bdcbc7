/* The datasets of a run: --data's comma-separated list, each element what --data takes alone
 * (a pair file, a folder holding train.tsv, a BEIR-format folder: gc_dataset_pairs_read). */
#ifndef GC_TRAIN_TRAIN_DATA_H
#define GC_TRAIN_TRAIN_DATA_H

#include "gradcache/train.h"

typedef struct gc_train_data {
    int count;        /* datasets, 1 .. GC_MAX_DATASETS */
    gc_pairs *pairs;  /* [count] */
    char **names;     /* [count]: the list's elements as given (the log names them) */
    char **paths;     /* [count]: what each was read from (messages) */
} gc_train_data;

/* Reads every dataset of `list`. GC_ERR_CONFIG (its message naming the list or the element) for an empty element ("a,,b", a trailing
 * comma) or more than GC_MAX_DATASETS of them; the reading's status for a dataset that cannot
 * be read, its message naming the file. Nothing is left allocated on failure (*data is zeroed). */
gc_status gc_train_data_read(const char *list, gc_train_data *data);
void gc_train_data_free(gc_train_data *data);

#endif
