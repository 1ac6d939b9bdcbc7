/* Memory accounting, per device, the CPU included.
 *
 * Every tensor storage is allocated through the library's allocator, which counts, for
 * each device, the bytes that are live (requested by storages not yet freed), the peak
 * of that count, and the number of allocations. The counts are exact: they are the
 * bytes the tensors asked for, not rounded sizes, so that a test or a benchmark can
 * predict them. The allocator caches freed blocks for reuse, on every device (a training
 * step allocates the same sizes every step: on a GPU cudaMalloc synchronises, on the CPU a
 * fresh block is pages the kernel maps and zeroes); `reserved_bytes` is what it holds
 * from the driver or malloc (live + cached, rounded to its size classes).
 *
 * An optional byte limit per device makes an allocation that would bring the live bytes
 * past it fail with GC_ERR_MEM_LIMIT (the op returns NULL; see error.h). This makes
 * memory-versus-batch experiments possible on a machine with no GPU. Under a limit the
 * cache gives blocks back rather than let reserved_bytes (the workspace aside) pass it, so a
 * refused step's cached blocks do not stay on top of the next step's. The limit can be
 * set with gc_memory_set_limit() or, at start-up, with the environment variable
 * GC_MEM_LIMIT: either one size for every device ("512M") or a comma-separated list of
 * device=size pairs ("cpu=2G,cuda:0=40G"). Sizes are integers with an optional suffix
 * K, M, G or T (powers of 1024) or the plain byte count.
 */
#ifndef GRADCACHE_MEMORY_H
#define GRADCACHE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "gradcache/device.h"
#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an allocation is for, so that live and peak bytes can be split by purpose: a storage
 * takes the role its thread has set when it is allocated (gc_memory_set_role) and keeps it.
 * The bucketer (ddp.h) allocates its gradient buffers as GRADIENTS and the optimizers their
 * state and master weights as OPTIMIZER; a program sets PARAMETERS around the making of its
 * model; the rest -- activations, their gradients, the loss, collectives' staging -- is OTHER. */
typedef enum gc_memory_role {
    GC_MEMORY_OTHER,
    GC_MEMORY_PARAMETERS,
    GC_MEMORY_GRADIENTS,
    GC_MEMORY_OPTIMIZER,
    GC_MEMORY_ROLES
} gc_memory_role;

/* Sets the role of the calling thread's next allocations and returns the previous one, so
 * that scopes nest (OTHER at first). A role outside the enum is a programmer error. */
gc_memory_role gc_memory_set_role(gc_memory_role role);
gc_memory_role gc_memory_get_role(void);
/* "other", "parameters", "gradients", "optimizer". */
const char *gc_memory_role_name(gc_memory_role role);

typedef struct gc_memory_stats {
    size_t live_bytes;     /* bytes held by live storages right now */
    size_t peak_bytes;     /* the highest live_bytes since start or the last peak reset */
    size_t limit_bytes;    /* the byte limit, or 0 for none */
    size_t reserved_bytes; /* bytes held from the driver or malloc: live + cached (rounded to
                              the cache's size classes) + workspace */
    size_t peak_reserved_bytes; /* the highest reserved_bytes since start or the last peak reset */
    size_t workspace_bytes;     /* CUDA: device memory the library keeps for itself outside any
                                   tensor (the cuBLAS workspace, reduction scratch, index
                                   checks), reserved once, at the device's first allocation;
                                   never under the limit. CPU: 0 */
    size_t packed_bytes;   /* weights' packed panels (gradcache/tensor.h, gc_tensor_set_weight):
                              outside live_bytes and peak_bytes (a cache kept with the weights,
                              which a step's figures would otherwise depend on), inside
                              reserved_bytes; a limit holds live + packed bytes */
    size_t peak_packed_bytes; /* the highest packed_bytes since start or the last peak reset */
    uint64_t alloc_count;  /* allocations served since start */
    uint64_t free_count;   /* storages freed since start */
    uint64_t driver_alloc_count; /* cudaMalloc (CPU: malloc) calls made (a cache hit makes none) */
    size_t role_live_bytes[GC_MEMORY_ROLES]; /* live_bytes split by role: they add up to it */
    size_t role_peak_bytes[GC_MEMORY_ROLES]; /* the split of peak_bytes: each role's live bytes at
                                                the moment the peak was reached (they add up to it;
                                                a role's own highest count may have come at
                                                another moment) */
} gc_memory_stats;

gc_memory_stats gc_memory_get_stats(gc_device device);
/* Sets peak_bytes to the current live_bytes (and peak_reserved_bytes to reserved_bytes,
 * peak_packed_bytes to packed_bytes, the split of the peak to the split of the live bytes). */
void gc_memory_reset_peak(gc_device device);
/* 0 removes the limit. A limit below the current live bytes only affects new allocations. */
void gc_memory_set_limit(gc_device device, size_t limit_bytes);
/* Returns every cached (free) block to the driver (CPU: to malloc). */
void gc_memory_empty_cache(gc_device device);
/* The device's free and total memory as its driver sees them (cudaMemGetInfo; for the CPU,
 * the available RAM, Linux's MemAvailable, and the installed RAM): what reserved_bytes can be checked against, since the
 * driver also counts the CUDA context and the libraries' own allocations. */
void gc_memory_device_info(gc_device device, size_t *free_bytes, size_t *total_bytes);

/* Parses a size such as "512M" or "1048576" into bytes; returns GC_ERR_FORMAT (with a
 * message naming the text) for anything else. Exposed for the CLI and for tests. */
gc_status gc_parse_size(const char *text, size_t *bytes);
/* Applies a GC_MEM_LIMIT-style specification ("512M", "cpu=2G,cuda:0=40G"). Applies
 * nothing and returns GC_ERR_FORMAT when any part of it is malformed. */
gc_status gc_memory_apply_limit_spec(const char *spec);

#ifdef __cplusplus
}
#endif
#endif
