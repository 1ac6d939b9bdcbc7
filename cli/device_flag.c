/* The --device flag (see device_flag.h). */
#include <stddef.h>

#include "device_flag.h"
#include "errors.h"

const char *const gc_device_flag_choices[] = {"cpu", "cuda", NULL};

int gc_device_from_flag(const char *command, int choice, gc_device *device) {
    *device = gc_cpu();
    if (choice != GC_DEVICE_FLAG_CUDA) return 0;
    if (gc_cuda_device_count() < 1)
        return gc_cli_fail(command, 2, "--device cuda: no CUDA device is available%s",
                           gc_cuda_built() ? "" : " (this build has no CUDA backend)");
    *device = gc_cuda(0);
    return 0;
}
