/* The check of class targets that cross-entropy and the contrastive losses share. */
#ifndef GC_NN_LOSS_TARGETS_H
#define GC_NN_LOSS_TARGETS_H

#include <stdbool.h>

#include "gradcache/tensor.h"

/* Every i32 target [N] in [0, classes), read back to the host (a device's targets too): the
 * first one outside stops the program with one line naming `op`, the target and its position.
 * Returns false, with the error recorded, when there is no host memory to read them into. */
bool gc_check_targets_in_range(const char *op, const gc_tensor *targets, int64_t classes);

#endif
