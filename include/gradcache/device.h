/* Devices: the CPU, or a CUDA GPU with an index. Data never moves between devices
 * silently: an op whose inputs live on different devices is a programmer error, and
 * copies are made with gc_to_device(). */
#ifndef GRADCACHE_DEVICE_H
#define GRADCACHE_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/dtype.h"
#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gc_device_type { GC_DEVICE_CPU = 0, GC_DEVICE_CUDA = 1 } gc_device_type;

typedef struct gc_device {
    gc_device_type type;
    int index; /* the CUDA ordinal; always 0 for the CPU */
} gc_device;

/* The most CUDA devices one process addresses (memory statistics are kept per device). */
#define GC_MAX_CUDA_DEVICES 16

static inline gc_device gc_cpu(void) { gc_device d = {GC_DEVICE_CPU, 0}; return d; }
static inline gc_device gc_cuda(int index) { gc_device d = {GC_DEVICE_CUDA, index}; return d; }
static inline bool gc_device_equal(gc_device a, gc_device b) {
    return a.type == b.type && a.index == b.index;
}

/* True when this build contains the CUDA backend (whether or not a GPU is present). */
bool gc_cuda_built(void);
/* Number of usable CUDA devices: 0 without a GPU, a driver, or the CUDA backend. */
int gc_cuda_device_count(void);
/* True once this process has asked for CUDA devices (gc_cuda_device_count, which every use
 * of a CUDA device goes through). CUDA does not survive fork(): a process that forks
 * workers which use CUDA must not have asked, not even to count the devices, or the
 * workers fail at their first CUDA call. Kept in every build, GPU or not, so that a
 * program (or a test) can check that rule on a machine without a GPU. */
bool gc_cuda_asked(void);
/* GC_OK when the device computes in `dtype`, else GC_ERR_UNAVAILABLE with a message naming
 * the device and what it lacks. The CPU computes in every dtype (f16 and bf16 stored, with
 * f32 arithmetic); a CUDA device needs compute capability 5.3 for f16 (half arithmetic) and
 * 8.0 for bf16 (cuBLAS's bf16 matrix multiply). */
gc_status gc_device_check_dtype(gc_device device, gc_dtype dtype);
/* Waits until all work queued on the device has finished (a no-op on the CPU). */
void gc_device_synchronize(gc_device device);
/* Threads the CPU kernels use: GC_NUM_THREADS when set (a positive integer), else the
 * number of online CPUs, at most 64. Results never depend on it: every CPU kernel computes
 * each element the same way whichever thread runs it. gc_set_cpu_threads changes it for
 * the kernels that start afterwards. */
int gc_cpu_threads(void);
void gc_set_cpu_threads(int threads);
/* Releases what the library keeps for the whole process between calls: today the CPU
 * kernels' worker threads, which are joined (they start again on the next parallel kernel,
 * so the library stays usable). A program calls it when it is done with the library, e.g.
 * last thing in main(): nothing breaks without it (the threads end with the process), but a
 * leak checker sees their stacks as possibly lost. Waits for a parallel kernel running in
 * another thread to finish; called from inside a kernel's range, it does nothing. */
void gc_shutdown(void);
/* How often the library has made the host wait for a device: copies from the device to
 * host memory (gc_item, gc_copy_to_host, gc_to_device to the CPU...; each waits for the work
 * queued before it) and explicit synchronisations. Counted on the CPU too, so that a test on
 * a machine without a GPU can check that a code path (an op, a GradCache chunk) makes none.
 * GC_CUDA_SYNC=1's wait after every kernel is a debugging aid and is not counted. */
typedef struct gc_sync_stats {
    uint64_t to_host_copies;
    uint64_t to_host_bytes;
    uint64_t synchronizations; /* gc_device_synchronize, and waits the library makes itself */
} gc_sync_stats;
gc_sync_stats gc_device_get_sync_stats(gc_device device);

/* "cpu" or "cuda:N", written into buf (at least 16 bytes); returns buf. */
const char *gc_device_str(gc_device device, char *buf, int size);

#ifdef __cplusplus
}
#endif
#endif
