/* Error reports of CUDA calls and the GC_CUDA_SYNC debugging mode (see check.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "index_check_cuda.h"

static bool sync_mode;
static pthread_once_t sync_mode_once = PTHREAD_ONCE_INIT;

static void read_sync_mode(void) {
    const char *value = getenv("GC_CUDA_SYNC");
    sync_mode = value && *value && strcmp(value, "0") != 0;
}

bool gc_cuda_sync_mode(void) {
    pthread_once(&sync_mode_once, read_sync_mode);
    return sync_mode;
}

void gc_cuda_fail(cudaError_t status, const char *call, const char *file, int line) {
    /* Without GC_CUDA_SYNC, an error met here may be a fault of any kernel queued before. */
    gc_fatal("CUDA error %s (%s) in %s at %s:%d%s", cudaGetErrorName(status), cudaGetErrorString(status), call, file,
             line,
             gc_cuda_sync_mode() ? ""
                                 : " (a kernel's fault surfaces at the next CUDA call: run with GC_CUDA_SYNC=1 to "
                                   "report it at its launch)");
}

void gc_cuda_after_launch(const char *file, int line) {
    cudaError_t status = cudaGetLastError(); /* a bad launch configuration, at once */
    if (status != cudaSuccess) gc_cuda_fail(status, "a launch", file, line);
    if (!gc_cuda_sync_mode()) return;
    status = cudaDeviceSynchronize();
    if (status != cudaSuccess) gc_cuda_fail(status, "the work launched (GC_CUDA_SYNC=1)", file, line);
    gc_cuda_report_index_checks("GC_CUDA_SYNC=1: found at its launch");
}
