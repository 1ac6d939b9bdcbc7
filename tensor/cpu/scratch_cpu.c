/* Per-thread scratch buffers (see scratch_cpu.h), behind a pthread key whose destructor
 * frees them when a thread ends. */
#include <pthread.h>
#include <stdlib.h>

#include "gradcache/error.h"
#include "scratch_cpu.h"

typedef struct scratch_buffers {
    void *data[GC_SCRATCH_SLOTS];
    size_t bytes[GC_SCRATCH_SLOTS];
} scratch_buffers;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void free_buffers(void *arg) {
    scratch_buffers *buffers = arg;
    for (int i = 0; i < GC_SCRATCH_SLOTS; i++) free(buffers->data[i]);
    free(buffers);
}

static void make_key(void) {
    if (pthread_key_create(&key, free_buffers) != 0) gc_fatal("cpu scratch: no thread-specific key left");
}

void *gc_cpu_scratch(gc_scratch_slot slot, size_t bytes) {
    pthread_once(&key_once, make_key);
    scratch_buffers *buffers = pthread_getspecific(key);
    if (!buffers) {
        buffers = calloc(1, sizeof *buffers);
        if (!buffers || pthread_setspecific(key, buffers) != 0) gc_fatal("cpu scratch: out of host memory");
    }
    if (buffers->bytes[slot] < bytes) {
        size_t rounded = (bytes + 4095) / 4096 * 4096;
        free(buffers->data[slot]);
        buffers->data[slot] = aligned_alloc(64, rounded);
        if (!buffers->data[slot]) gc_fatal("cpu scratch: out of host memory for %zu bytes", bytes);
        buffers->bytes[slot] = rounded;
    }
    return buffers->data[slot];
}
