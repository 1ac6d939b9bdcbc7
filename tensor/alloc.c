/* Per-device accounting and the block cache; see alloc.h and gradcache/memory.h.
 *
 * The cache keeps freed blocks in lists hashed by size class; a request is served from its
 * class's blocks when it can, from the backend (cudaMalloc, malloc) otherwise. When the
 * backend is out of memory, the cache is returned to it and the request tried once more: a
 * cached block of another class is memory the request could use. Under a byte limit the
 * cache also gives blocks back rather than hold more than the limit leaves. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "gradcache/memory.h"

typedef struct cached_block {
    void *ptr;
    size_t size_class;
    struct cached_block *next;
} cached_block;

/* Lists of cached blocks, a size class always in the same one (newest first), so that a
 * lookup walks the few classes that share a list rather than every cached block. */
#define CACHE_LISTS 256 /* indexed by 8 bits of a hash */

typedef struct device_pool {
    gc_memory_stats stats;
    bool caching;
    size_t cached_blocks;
    cached_block *free_blocks[CACHE_LISTS];
    /* Live blocks handed out for a request of a smaller class (take_cached), by pointer, so
     * that they go back to the cache under their own class. */
    size_t lent_blocks;
    cached_block *lent[CACHE_LISTS];
    bool workspace_ready; /* the backend's workspace is reserved (or needs none) */
} device_pool;

/* Slot 0 is the CPU, slot 1 + i is CUDA device i. */
static device_pool pools[1 + GC_MAX_CUDA_DEVICES];
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static device_pool *pool_for(gc_device device) {
    if (device.type == GC_DEVICE_CPU) return &pools[0];
    if (device.index < 0 || device.index >= GC_MAX_CUDA_DEVICES)
        gc_fatal("alloc: CUDA device index %d outside [0, %d)", device.index, GC_MAX_CUDA_DEVICES);
    return &pools[1 + device.index];
}

/* Runs once, before the first use of any pool: every device caches by default (a training
 * step allocates the same sizes every step; on the CPU, fresh blocks from malloc are fresh
 * pages the kernel maps and zeroes), and the limits of GC_MEM_LIMIT apply from the start.
 * A malformed GC_MEM_LIMIT stops the program: running an experiment without the limit the
 * user asked for would give a wrong answer. */
static void init_pools(void) {
    for (int i = 0; i <= GC_MAX_CUDA_DEVICES; i++) pools[i].caching = true;
    const char *spec = getenv("GC_MEM_LIMIT");
    if (!spec || !*spec) return;
    gc_limit_entry entries[GC_MAX_LIMIT_ENTRIES];
    int count = 0;
    if (gc_parse_limit_spec(spec, entries, &count) != GC_OK) gc_fatal("GC_MEM_LIMIT: %s", gc_last_error());
    for (int i = 0; i < count; i++) pool_for(entries[i].device)->stats.limit_bytes = entries[i].limit_bytes;
}

/* Classes are fine only below 64 KiB: above, sizes that differ by a row (one encode batch
 * of 30 texts after one of 31, training batches padded to their own lengths) would each
 * get a class and keep a cached block of their own, and a long stream of such batches grew
 * the process by hundreds of MB (all-MiniLM-L6-v2 in batches of 32: 484 MB resident after
 * 256 texts, 873 MB after 5,000; with quarter steps from 64 KiB, 463 and 532 MB). */
size_t gc_alloc_size_class(size_t nbytes) {
    const size_t granule = 512, small_limit = (size_t)1 << 16;
    if (nbytes == 0) return granule; /* a zero-byte tensor still gets a unique pointer */
    if (nbytes <= small_limit) return (nbytes + granule - 1) / granule * granule;
    size_t power = small_limit;
    while (power * 2 < nbytes) power *= 2; /* power < nbytes <= 2 * power */
    size_t quarter = power / 4;
    return (nbytes + quarter - 1) / quarter * quarter;
}

/* The list for `key` among CACHE_LISTS: Fibonacci hashing, so that keys that are multiples
 * of a power of two (large classes, aligned pointers) spread over the lists too. */
static size_t list_index(uint64_t key) { return (size_t)((key * 0x9E3779B97F4A7C15u) >> 56); }

/* The free list of a class, by its granule count. */
static cached_block **cache_list(device_pool *pool, size_t size_class) {
    return &pool->free_blocks[list_index(size_class / 512)];
}

/* Bytes taken from (positive) or given back to the driver. */
static void add_reserved(device_pool *pool, size_t nbytes) {
    pool->stats.reserved_bytes += nbytes;
    if (pool->stats.reserved_bytes > pool->stats.peak_reserved_bytes)
        pool->stats.peak_reserved_bytes = pool->stats.reserved_bytes;
}

/* The backend's own device memory (the cuBLAS workspace, scratch), reserved with the
 * device's first allocation so that no kernel ever allocates, and so that running out of
 * memory for it is an ordinary, recoverable allocation failure. False when the device is
 * full. */
static bool reserve_workspace_locked(const gc_backend *backend, gc_device device, device_pool *pool) {
    if (pool->workspace_ready) return true;
    size_t nbytes = backend->workspace_bytes ? backend->workspace_bytes(device.index) : 0;
    if (nbytes) {
        void *ptr = backend->raw_alloc(device.index, nbytes);
        if (!ptr) return false;
        backend->adopt_workspace(device.index, ptr, nbytes);
        pool->stats.workspace_bytes = nbytes;
        pool->stats.driver_alloc_count++;
        add_reserved(pool, nbytes);
    }
    pool->workspace_ready = true;
    return true;
}

/* The list of lent blocks that holds `ptr`'s record, if any, by its cache line. */
static cached_block **lent_list(device_pool *pool, const void *ptr) {
    return &pool->lent[list_index((uintptr_t)ptr / 64)];
}

/* The cached block of exactly `size_class` bytes, unlinked (its record still to free), or NULL. */
static cached_block *unlink_cached(device_pool *pool, size_t size_class) {
    for (cached_block **link = cache_list(pool, size_class); *link; link = &(*link)->next) {
        cached_block *block = *link;
        if (block->size_class != size_class) continue;
        *link = block->next;
        pool->cached_blocks--;
        return block;
    }
    return NULL;
}

/* A request whose class no cached block has may take one of the next LEND_CLASSES classes up
 * (above 64 KiB, where the classes are quarter steps: up to twice its own): texts encoded
 * longest first (encode_texts.c) then run the later, shorter batches in blocks the first
 * ones made. With exact classes only, each batch of a length not seen before took fresh
 * blocks: all-MiniLM-L6-v2 over 512 WordNet definitions in batches of 32 faulted in 116 MB of
 * fresh pages in one pass, 64 MB now, and bench_encode's peak resident memory went 494 ->
 * 438 MB (its texts per second did not change measurably). Lending further up did worse
 * (8 classes: 91 MB, and blocks kept changing hands pass after pass): a small request holding
 * a large block sends the next large request to the backend. */
#define LEND_CLASSES 4

/* The next class above `size_class` (gc_alloc_size_class's steps). */
static size_t next_class(size_t size_class) { return gc_alloc_size_class(size_class + 1); }

static void *take_cached(device_pool *pool, size_t size_class) {
    cached_block *block = unlink_cached(pool, size_class);
    if (block) {
        void *ptr = block->ptr;
        free(block);
        return ptr;
    }
    size_t larger = size_class;
    for (int step = 0; step < LEND_CLASSES; step++) {
        larger = next_class(larger);
        block = unlink_cached(pool, larger);
        if (!block) continue;
        cached_block **list = lent_list(pool, block->ptr); /* the record now says where it goes back */
        block->next = *list;
        *list = block;
        pool->lent_blocks++;
        return block->ptr;
    }
    return NULL;
}

/* The lent record of `ptr`, unlinked, or NULL when the block was not lent. */
static cached_block *unlink_lent(device_pool *pool, const void *ptr) {
    if (!pool->lent_blocks) return NULL;
    for (cached_block **link = lent_list(pool, ptr); *link; link = &(*link)->next) {
        cached_block *block = *link;
        if (block->ptr != ptr) continue;
        *link = block->next;
        pool->lent_blocks--;
        return block;
    }
    return NULL;
}

/* Gives cached blocks back to the backend until the pool holds at most `keep` bytes from it
 * or no cached block is left (keep 0: the whole cache). */
static void release_cache(const gc_backend *backend, gc_device device, device_pool *pool, size_t keep) {
    bool released = false;
    for (int list = 0; list < CACHE_LISTS && pool->stats.reserved_bytes > keep; list++)
        while (pool->free_blocks[list] && pool->stats.reserved_bytes > keep) {
            cached_block *block = pool->free_blocks[list];
            pool->free_blocks[list] = block->next;
            backend->raw_free(device.index, block->ptr, block->size_class);
            pool->stats.reserved_bytes -= block->size_class;
            free(block);
            pool->cached_blocks--;
            released = true;
        }
    if (released && backend->trim) backend->trim(device.index);
}

/* Under a limit, the blocks the cache keeps count against it too: before a fresh block of
 * `size_class` bytes would bring what the pool holds from the backend (live, packed and
 * cached blocks, rounded to their classes; the workspace aside) past the limit, cached blocks
 * go back until it fits or none is left. Without this a step the limit refused would leave
 * its blocks cached, of sizes the next step (another batch, a smaller chunk) never asks for,
 * and the process would hold about the limit once more for every refused step. */
static void release_over_limit(const gc_backend *backend, gc_device device, device_pool *pool, size_t size_class) {
    size_t limit = pool->stats.limit_bytes;
    if (!limit || !pool->cached_blocks) return;
    size_t workspace = pool->stats.workspace_bytes;
    size_t room = limit > SIZE_MAX - workspace ? SIZE_MAX : limit + workspace; /* any limit a flag can say */
    release_cache(backend, device, pool, room > size_class ? room - size_class : 0);
}

static void *allocate_locked(const gc_backend *backend, gc_device device, device_pool *pool,
                             size_t nbytes) {
    if (!pool->caching) {
        void *ptr = backend->raw_alloc(device.index, nbytes);
        if (ptr) add_reserved(pool, nbytes);
        return ptr;
    }
    size_t size_class = gc_alloc_size_class(nbytes);
    void *ptr = take_cached(pool, size_class);
    if (ptr) return ptr;
    release_over_limit(backend, device, pool, size_class);
    ptr = backend->raw_alloc(device.index, size_class);
    if (!ptr && pool->cached_blocks) {
        release_cache(backend, device, pool, 0);
        ptr = backend->raw_alloc(device.index, size_class);
    }
    if (ptr) {
        add_reserved(pool, size_class);
        pool->stats.driver_alloc_count++;
    }
    return ptr;
}

/* The role of this thread's allocations (memory.h). */
static _Thread_local gc_memory_role current_role = GC_MEMORY_OTHER;

static void check_role(const char *op, gc_memory_role role) {
    if ((int)role < 0 || role >= GC_MEMORY_ROLES) gc_fatal("%s: no memory role %d", op, (int)role);
}

gc_memory_role gc_memory_set_role(gc_memory_role role) {
    check_role("memory_set_role", role);
    gc_memory_role previous = current_role;
    current_role = role;
    return previous;
}

gc_memory_role gc_memory_get_role(void) { return current_role; }

const char *gc_memory_role_name(gc_memory_role role) {
    static const char *const names[GC_MEMORY_ROLES] = {"other", "parameters", "gradients", "optimizer"};
    check_role("memory_role_name", role);
    return names[role];
}

/* gc_alloc (into live_bytes under `role`), or for packed panels (into packed_bytes, quietly:
 * see alloc.h). */
static void *alloc_counted(gc_device device, size_t nbytes, gc_memory_role role, bool packed) {
    check_role("alloc", role);
    pthread_once(&pools_once, init_pools);
    const gc_backend *backend = gc_backend_for(device);
    char name[16];
    bool quiet = packed;
    pthread_mutex_lock(&pools_lock);
    device_pool *pool = pool_for(device);
    gc_memory_stats *stats = &pool->stats;
    size_t held = stats->live_bytes + (packed ? stats->packed_bytes : 0); /* what the limit holds */
    if (stats->limit_bytes && (held > stats->limit_bytes || nbytes > stats->limit_bytes - held)) {
        size_t live = stats->live_bytes, limit = stats->limit_bytes;
        pthread_mutex_unlock(&pools_lock);
        if (!quiet)
            gc_set_error(GC_ERR_MEM_LIMIT,
                         "memory limit reached on %s: requested %zu bytes, live %zu bytes, limit %zu bytes",
                     gc_device_str(device, name, sizeof name), nbytes, live, limit);
        return NULL;
    }
    if (!reserve_workspace_locked(backend, device, pool)) {
        size_t workspace = backend->workspace_bytes(device.index), live = stats->live_bytes;
        pthread_mutex_unlock(&pools_lock);
        if (!quiet)
            gc_set_error(GC_ERR_OUT_OF_MEMORY,
                     "out of memory on %s: no room for the library's workspace of %zu bytes (requested %zu bytes, "
                     "live %zu bytes)",
                     gc_device_str(device, name, sizeof name), workspace, nbytes, live);
        return NULL;
    }
    void *ptr = allocate_locked(backend, device, pool, nbytes);
    if (ptr && packed) {
        stats->packed_bytes += nbytes;
        if (stats->packed_bytes > stats->peak_packed_bytes) stats->peak_packed_bytes = stats->packed_bytes;
    } else if (ptr) {
        stats->live_bytes += nbytes;
        stats->role_live_bytes[role] += nbytes;
        if (stats->live_bytes > stats->peak_bytes) { /* the split of a new peak is the split right now */
            stats->peak_bytes = stats->live_bytes;
            memcpy(stats->role_peak_bytes, stats->role_live_bytes, sizeof stats->role_peak_bytes);
        }
        stats->alloc_count++;
    }
    size_t live = stats->live_bytes;
    pthread_mutex_unlock(&pools_lock);
    if (!ptr && !quiet)
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "out of memory on %s: requested %zu bytes, live %zu bytes",
                     gc_device_str(device, name, sizeof name), nbytes, live);
    return ptr;
}

void *gc_alloc(gc_device device, size_t nbytes, gc_memory_role role) {
    return alloc_counted(device, nbytes, role, false);
}

/* gc_free of a block counted in live_bytes under `role`, or in packed_bytes. */
static void free_counted(gc_device device, void *ptr, size_t nbytes, gc_memory_role role, bool packed) {
    if (!ptr) return;
    check_role("free", role);
    const gc_backend *backend = gc_backend_for(device);
    pthread_mutex_lock(&pools_lock);
    device_pool *pool = pool_for(device);
    if (packed) {
        pool->stats.packed_bytes -= nbytes;
    } else {
        pool->stats.live_bytes -= nbytes;
        pool->stats.role_live_bytes[role] -= nbytes;
        pool->stats.free_count++;
    }
    cached_block *lent = pool->caching ? unlink_lent(pool, ptr) : NULL;
    size_t reserved = lent ? lent->size_class : pool->caching ? gc_alloc_size_class(nbytes) : nbytes;
    /* Keep the block for reuse; should even this small malloc fail, give the block back. */
    cached_block *block = lent ? lent : pool->caching ? malloc(sizeof *block) : NULL;
    if (block) {
        cached_block **list = cache_list(pool, reserved);
        *block = (cached_block){.ptr = ptr, .size_class = reserved, .next = *list};
        *list = block;
        pool->cached_blocks++;
    } else {
        backend->raw_free(device.index, ptr, reserved);
        pool->stats.reserved_bytes -= reserved;
    }
    pthread_mutex_unlock(&pools_lock);
}

void gc_free(gc_device device, void *ptr, size_t nbytes, gc_memory_role role) {
    free_counted(device, ptr, nbytes, role, false);
}

/* Packed panels have no role: they are outside live_bytes, whose split the roles are. */
void *gc_alloc_packed(gc_device device, size_t nbytes) { return alloc_counted(device, nbytes, GC_MEMORY_OTHER, true); }

void gc_free_packed(gc_device device, void *ptr, size_t nbytes) {
    free_counted(device, ptr, nbytes, GC_MEMORY_OTHER, true);
}

void gc_alloc_set_caching(gc_device device, bool enabled) {
    pthread_once(&pools_once, init_pools);
    const gc_backend *backend = gc_backend_for(device);
    pthread_mutex_lock(&pools_lock);
    device_pool *pool = pool_for(device);
    if (pool->stats.live_bytes + pool->stats.packed_bytes != 0 && pool->caching != enabled) {
        pthread_mutex_unlock(&pools_lock);
        gc_fatal("alloc: caching can only be switched while no memory is live (%zu bytes are)",
                 pool->stats.live_bytes);
    }
    if (!enabled) release_cache(backend, device, pool, 0);
    pool->caching = enabled;
    pthread_mutex_unlock(&pools_lock);
}

gc_memory_stats gc_memory_get_stats(gc_device device) {
    pthread_once(&pools_once, init_pools);
    pthread_mutex_lock(&pools_lock);
    gc_memory_stats stats = pool_for(device)->stats;
    pthread_mutex_unlock(&pools_lock);
    return stats;
}

void gc_memory_reset_peak(gc_device device) {
    pthread_once(&pools_once, init_pools);
    pthread_mutex_lock(&pools_lock);
    device_pool *pool = pool_for(device);
    pool->stats.peak_bytes = pool->stats.live_bytes;
    memcpy(pool->stats.role_peak_bytes, pool->stats.role_live_bytes, sizeof pool->stats.role_peak_bytes);
    pool->stats.peak_reserved_bytes = pool->stats.reserved_bytes;
    pool->stats.peak_packed_bytes = pool->stats.packed_bytes;
    pthread_mutex_unlock(&pools_lock);
}

void gc_memory_set_limit(gc_device device, size_t limit_bytes) {
    pthread_once(&pools_once, init_pools);
    pthread_mutex_lock(&pools_lock);
    pool_for(device)->stats.limit_bytes = limit_bytes;
    pthread_mutex_unlock(&pools_lock);
}

void gc_memory_empty_cache(gc_device device) {
    pthread_once(&pools_once, init_pools);
    const gc_backend *backend = gc_backend_for(device);
    pthread_mutex_lock(&pools_lock);
    release_cache(backend, device, pool_for(device), 0);
    pthread_mutex_unlock(&pools_lock);
}

void gc_memory_device_info(gc_device device, size_t *free_bytes, size_t *total_bytes) {
    gc_backend_for(device)->memory_info(device.index, free_bytes, total_bytes);
}
