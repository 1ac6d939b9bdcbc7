/* With several datasets, each one's mean loss over its steps between two logging points (the
 * log's "dataset_losses"): running sums that the checkpoint keeps, so that a resumed run logs
 * the means a straight one does. */
#ifndef GC_TRAIN_DATASET_LOSSES_H
#define GC_TRAIN_DATASET_LOSSES_H

#include "gradcache/train.h"

typedef struct gc_dataset_losses {
    int count;                      /* datasets; 1: none kept (the loss is the dataset's) */
    double sums[GC_MAX_DATASETS];   /* each dataset's finite losses since the last logging point */
    int64_t steps[GC_MAX_DATASETS]; /* how many */
} gc_dataset_losses;

/* A step's loss (of `dataset`); a loss that is not finite (a skipped f16 step's) is left out. */
void gc_dataset_losses_add(gc_dataset_losses *losses, int dataset, double loss);
/* means[count]: each dataset's mean since the last take (nan: no step), and the sums start again. */
void gc_dataset_losses_take(gc_dataset_losses *losses, double *means);

#endif
