/* Each dataset's mean loss between logging points (see dataset_losses.h). */
#include <math.h>

#include "dataset_losses.h"

void gc_dataset_losses_add(gc_dataset_losses *losses, int dataset, double loss) {
    if (!isfinite(loss)) return;
    losses->sums[dataset] += loss;
    losses->steps[dataset]++;
}

void gc_dataset_losses_take(gc_dataset_losses *losses, double *means) {
    for (int d = 0; d < losses->count; d++) {
        means[d] = losses->steps[d] ? losses->sums[d] / (double)losses->steps[d] : NAN;
        losses->sums[d] = 0;
        losses->steps[d] = 0;
    }
}
