/* The key in which a GPU kernel records the first bad index it finds (backend check_index),
 * shared by the CUDA kernel (cuda/index_check_cuda.cu) and the CPU tests that pin it down.
 *
 * Threads that find bad indices race; a 64-bit atomicMin over keys that order like
 * positions keeps the first one, and with it its value: the high 32 bits hold the position
 * (saturated at GC_INDEX_KEY_FAR, so positions at or past it keep their order among
 * themselves only roughly: the message then says "at least"), the low 32 bits the index
 * itself. A slot no thread wrote holds GC_INDEX_KEY_NONE, above every key. */
#ifndef GC_TENSOR_INDEX_KEY_IMPL_H
#define GC_TENSOR_INDEX_KEY_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "host_device.h"

#define GC_INDEX_KEY_NONE UINT64_MAX
/* The highest position a key holds exactly; one below 2^32 - 1, so that no key (not even
 * index -1, all ones, at a saturated position) equals GC_INDEX_KEY_NONE. */
#define GC_INDEX_KEY_FAR 0xFFFFFFFEu

static inline GC_HD uint64_t gc_index_key(int64_t position, int32_t value) {
    uint64_t high = position < (int64_t)GC_INDEX_KEY_FAR ? (uint64_t)position : GC_INDEX_KEY_FAR;
    return high << 32 | (uint32_t)value;
}

/* The position a key names, and whether it is only a lower bound (saturated). */
static inline GC_HD int64_t gc_index_key_position(uint64_t key, bool *at_least) {
    uint64_t high = key >> 32;
    *at_least = high == GC_INDEX_KEY_FAR;
    return (int64_t)high;
}

static inline GC_HD int32_t gc_index_key_value(uint64_t key) { return (int32_t)(uint32_t)(key & 0xFFFFFFFFu); }

#endif
