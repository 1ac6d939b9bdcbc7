/* The check of class targets (loss_targets.h). */
#include <stdint.h>
#include <stdlib.h>

#include "loss_targets.h"

bool gc_check_targets_in_range(const char *op, const gc_tensor *targets, int64_t classes) {
    int64_t rows = gc_numel(targets);
    int32_t *host = malloc(sizeof *host * (size_t)(rows ? rows : 1));
    if (!host) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: no host memory to check %lld targets", op, (long long)rows);
        return false;
    }
    gc_copy_to_host(targets, host);
    for (int64_t i = 0; i < rows; i++)
        if (host[i] < 0 || host[i] >= classes) {
            int32_t target = host[i];
            free(host);
            gc_fatal("%s: target %d at position %lld is outside [0, %lld)", op, (int)target, (long long)i,
                     (long long)classes);
        }
    free(host);
    return true;
}
