/* Index checks on CUDA without a host round trip (backend check_index).
 *
 * Each check is one kernel over the indices that records the first bad one in a slot of
 * device memory (its own slot: a check named later never hides one named earlier), keyed
 * as ../index_key_impl.h describes. The host keeps, per device, what each pending slot
 * checks (its gc_index_site), and reads the slots only where it waits for the device anyway:
 * after a copy to the host, a synchronisation, or, under GC_CUDA_SYNC=1, every launch. The
 * first bad slot stops the program with the same message the CPU gives at once. Should
 * GC_INDEX_SLOTS checks pend with no wait in between, the slots are read then (a counted
 * synchronisation; a training step waits for its loss long before). */
#include <pthread.h>
#include <stdlib.h>

#include "../index_key_impl.h"
#include "dtype_cuda.cuh"
#include "index_check_cuda.h"
#include "kernels_cuda.h"
#include "workspace_cuda.h"

namespace {

/* index [n]: every bad index offers its key; atomicMin keeps the first. */
__global__ void check_index_kernel(const int32_t *index, int64_t n, int64_t bound, unsigned long long *slot) {
    GC_CUDA_GRID_STRIDE(i, n) {
        int32_t value = index[i];
        if (value < 0 || value >= bound) atomicMin(slot, (unsigned long long)gc_index_key(i, value));
    }
}

/* One device's pending checks: slots [0, used) are in flight or done, unread. */
struct pending_checks {
    unsigned long long *slots; /* device [GC_INDEX_SLOTS], GC_INDEX_KEY_NONE when clean */
    gc_index_site *sites;      /* host [GC_INDEX_SLOTS]: what each slot checks */
    unsigned long long *keys;  /* host [GC_INDEX_SLOTS]: the slots, read back */
    int used;
};

pending_checks checks[GC_MAX_CUDA_DEVICES];
pthread_mutex_t checks_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reads the slots in use (the device has finished them: the caller waited for it or is
 * about to, in this synchronous copy), names the first bad index, and cleans the slots. */
void report_locked(pending_checks *pending, const char *note) {
    if (pending->used == 0) return;
    size_t nbytes = (size_t)pending->used * sizeof *pending->keys;
    GC_CUDA_CHECK(cudaMemcpy(pending->keys, pending->slots, nbytes, cudaMemcpyDeviceToHost));
    for (int slot = 0; slot < pending->used; slot++) {
        uint64_t key = pending->keys[slot];
        if (key == GC_INDEX_KEY_NONE) continue;
        bool at_least;
        int64_t position = gc_index_key_position(key, &at_least);
        gc_index_site_fail(&pending->sites[slot], position, at_least, gc_index_key_value(key), note);
    }
    GC_CUDA_CHECK(cudaMemsetAsync(pending->slots, 0xff, nbytes, 0)); /* every byte 0xff: GC_INDEX_KEY_NONE */
    pending->used = 0;
}

} // namespace

extern "C" void gc_cuda_index_checks_adopt(int device_index, unsigned long long *slots) {
    pending_checks *pending = &checks[device_index];
    pending->sites = (gc_index_site *)malloc(GC_INDEX_SLOTS * sizeof *pending->sites);
    pending->keys = (unsigned long long *)malloc(GC_INDEX_SLOTS * sizeof *pending->keys);
    if (!pending->sites || !pending->keys) gc_fatal("index checks: out of host memory for cuda:%d", device_index);
    GC_CUDA_CHECK(cudaMemsetAsync(slots, 0xff, GC_INDEX_SLOTS * sizeof *slots, 0));
    pending->slots = slots;
    pending->used = 0;
}

extern "C" void gc_cuda_report_index_checks(const char *note) {
    int device = gc_cuda_current_device();
    pthread_mutex_lock(&checks_lock);
    if (checks[device].slots) report_locked(&checks[device], note);
    pthread_mutex_unlock(&checks_lock);
}

extern "C" void gc_cuda_check_index(const int32_t *index, size_t n, const gc_index_site *site) {
    if (n == 0) return;
    int device = gc_cuda_current_device();
    pthread_mutex_lock(&checks_lock);
    pending_checks *pending = &checks[device];
    if (!pending->slots) gc_fatal("check_index: cuda:%d has no workspace (no tensor was allocated there)", device);
    if (pending->used == GC_INDEX_SLOTS) {
        gc_device_count_synchronization(gc_cuda(device)); /* report_locked's copy waits */
        report_locked(pending, "found when the device's pending index checks filled up");
    }
    int slot = pending->used++;
    pending->sites[slot] = *site;
    /* Launched under the lock, so that no report reads this slot before its kernel is queued. */
    check_index_kernel<<<gc_cuda_blocks((int64_t)n), GC_CUDA_THREADS>>>(index, (int64_t)n, site->bound,
                                                                       pending->slots + slot);
    pthread_mutex_unlock(&checks_lock);
    GC_CUDA_AFTER_LAUNCH(); /* checks the launch; under GC_CUDA_SYNC=1 reports at once */
}
