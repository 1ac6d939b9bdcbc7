/* The allocator under every tensor storage: per-device accounting (live, peak, count),
 * the optional byte limit, and a cache of freed blocks, on by default for every device:
 * cudaMalloc/cudaFree synchronise a GPU, and on the CPU a fresh block is fresh pages that
 * the kernel maps and zeroes on first touch (gc_memory_empty_cache gives it all back). */
#ifndef GC_TENSOR_ALLOC_H
#define GC_TENSOR_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "gradcache/device.h"
#include "gradcache/error.h"
#include "gradcache/memory.h"

/* nbytes of device memory, counted under `role`, or NULL with GC_ERR_MEM_LIMIT /
 * GC_ERR_OUT_OF_MEMORY recorded. A request of 0 bytes returns a valid, unique pointer. */
void *gc_alloc(gc_device device, size_t nbytes, gc_memory_role role);
/* ptr must come from gc_alloc(device, nbytes, role) with the same nbytes and role. NULL is a
 * no-op. */
void gc_free(gc_device device, void *ptr, size_t nbytes, gc_memory_role role);

/* gc_alloc and gc_free for a weight's packed panels (tensor/packed.c), counted in the device's
 * packed_bytes and reserved_bytes, not in live_bytes: what a step or a forward holds stays the
 * same with or without them, so peaks (a run's log, resumed or not) do not depend on which
 * process made them. The limit holds live and packed bytes together. A refusal records no
 * error: the panels are an optimisation, and the error of an earlier op in a chain must
 * survive it. */
void *gc_alloc_packed(gc_device device, size_t nbytes);
void gc_free_packed(gc_device device, void *ptr, size_t nbytes);

/* Turns the block cache on or off for a device (turning it off empties it). */
void gc_alloc_set_caching(gc_device device, bool enabled);

/* The size class a request of nbytes is served from: 512-byte granules up to 64 KiB, then
 * four classes per power of two (at most 25% slack, and few classes for a stream of sizes
 * that differ by a row: see alloc.c). Exposed for tests. */
size_t gc_alloc_size_class(size_t nbytes);

/* One device=limit pair of a GC_MEM_LIMIT specification (see gradcache/memory.h). */
#define GC_MAX_LIMIT_ENTRIES (1 + GC_MAX_CUDA_DEVICES)
typedef struct gc_limit_entry {
    gc_device device;
    size_t limit_bytes;
} gc_limit_entry;

/* Parses a specification into at most GC_MAX_LIMIT_ENTRIES entries (a bare size gives one
 * entry per device). GC_ERR_FORMAT, with a message naming the bad part, on any error. */
gc_status gc_parse_limit_spec(const char *spec, gc_limit_entry *entries, int *count);

#endif
