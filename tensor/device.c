/* Devices, the dispatch from a device to its backend, and the count of host waits. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "backend.h"
#include "cpu/thread_pool.h"
#include "gradcache/config.h"
#include "gradcache/device.h"
#include "gradcache/error.h"

#ifdef GC_HAVE_CUDA
#include "cuda/runtime_cuda.h"
#endif

/* The CPU's table: the whole one, or with GC_COMPOSED_OPS=1 (read once) the one without the
 * fused kernels CUDA lacks, so that a test run on the CPU takes the paths a GPU takes. */
static const gc_backend *cpu_table;
static pthread_once_t cpu_table_once = PTHREAD_ONCE_INIT;

static void choose_cpu_table(void) {
    const char *composed = getenv("GC_COMPOSED_OPS");
    cpu_table = composed && strcmp(composed, "1") == 0 ? &gc_cpu_composed_backend : &gc_cpu_backend;
}

const gc_backend *gc_backend_for(gc_device device) {
    if (device.type == GC_DEVICE_CPU) {
        pthread_once(&cpu_table_once, choose_cpu_table);
        return cpu_table;
    }
    if (device.type != GC_DEVICE_CUDA) gc_fatal("device: unknown device type %d", (int)device.type);
#ifdef GC_HAVE_CUDA
    int count = gc_cuda_device_count();
    if (device.index < 0 || device.index >= count)
        gc_fatal("device: cuda:%d requested but %d CUDA device(s) are present", device.index, count);
    gc_cuda_activate(device.index);
    return &gc_cuda_backend;
#else
    gc_fatal("device: cuda:%d requested but this gradcache was built without CUDA (-Dcuda=disabled "
             "or no CUDA toolkit at configure time)", device.index);
#endif
}

bool gc_cuda_built(void) {
#ifdef GC_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

static atomic_bool cuda_asked;

int gc_cuda_device_count(void) {
    atomic_store(&cuda_asked, true);
#ifdef GC_HAVE_CUDA
    return gc_cuda_probe_device_count();
#else
    return 0;
#endif
}

bool gc_cuda_asked(void) { return atomic_load(&cuda_asked); }

gc_status gc_device_check_dtype(gc_device device, gc_dtype dtype) {
    if ((int)dtype < 0 || dtype >= GC_DTYPE_COUNT) gc_fatal("device_check_dtype: unknown dtype %d", (int)dtype);
    gc_backend_for(device); /* a device that does not exist is a programmer error */
    if (device.type == GC_DEVICE_CPU || (dtype != GC_F16 && dtype != GC_BF16)) return GC_OK;
#ifdef GC_HAVE_CUDA
    int major, minor, need = dtype == GC_F16 ? 53 : 80;
    gc_cuda_capability(device.index, &major, &minor);
    if (10 * major + minor >= need) return GC_OK;
    gc_set_error(GC_ERR_UNAVAILABLE, "cuda:%d (compute capability %d.%d) does not support %s, which needs %d.%d",
                 device.index, major, minor, gc_dtype_name(dtype), need / 10, need % 10);
    return GC_ERR_UNAVAILABLE;
#else
    return GC_OK; /* not reached: gc_backend_for stopped on a CUDA device */
#endif
}
/* Slot 0 is the CPU, slot 1 + i is CUDA device i (as in tensor/alloc.c). */
static struct {
    atomic_uint_least64_t to_host_copies, to_host_bytes, synchronizations;
} sync_counts[1 + GC_MAX_CUDA_DEVICES];

static int sync_slot(gc_device device) {
    if (device.type == GC_DEVICE_CPU) return 0;
    if (device.index < 0 || device.index >= GC_MAX_CUDA_DEVICES)
        gc_fatal("device: CUDA device index %d outside [0, %d)", device.index, GC_MAX_CUDA_DEVICES);
    return 1 + device.index;
}

void gc_device_count_synchronization(gc_device device) {
    atomic_fetch_add(&sync_counts[sync_slot(device)].synchronizations, 1);
}

void gc_device_synchronize(gc_device device) {
    gc_device_count_synchronization(device);
    gc_backend_for(device)->synchronize(device.index);
}

void gc_device_copy_to_host(gc_device device, void *host, const void *src, size_t nbytes) {
    int slot = sync_slot(device);
    atomic_fetch_add(&sync_counts[slot].to_host_copies, 1);
    atomic_fetch_add(&sync_counts[slot].to_host_bytes, nbytes);
    gc_backend_for(device)->memcpy_to_host(host, src, nbytes);
}

gc_sync_stats gc_device_get_sync_stats(gc_device device) {
    int slot = sync_slot(device);
    return (gc_sync_stats){.to_host_copies = atomic_load(&sync_counts[slot].to_host_copies),
                           .to_host_bytes = atomic_load(&sync_counts[slot].to_host_bytes),
                           .synchronizations = atomic_load(&sync_counts[slot].synchronizations)};
}

const char *gc_device_str(gc_device device, char *buf, int size) {
    if (device.type == GC_DEVICE_CPU) snprintf(buf, (size_t)size, "cpu");
    else snprintf(buf, (size_t)size, "cuda:%d", device.index);
    return buf;
}

void gc_shutdown(void) { gc_thread_pool_stop(); }
