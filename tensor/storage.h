/* The bytes behind one or more tensors. */
#ifndef GC_TENSOR_STORAGE_H
#define GC_TENSOR_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/device.h"
#include "gradcache/memory.h"

struct gc_packed_form;

struct gc_storage {
    void *data;       /* [nbytes] on `device`, from gc_alloc */
    size_t nbytes;
    gc_device device;
    gc_memory_role role; /* what the bytes are counted as (memory.h) */
    int refcount;     /* number of tensors viewing it */
    /* Incremented by every write to the bytes through the library (gc_tensor_mark_written):
     * a form derived from them is valid for the version it was made at only. */
    uint64_t version;
    bool weight;                   /* gc_tensor_set_weight: products keep its packed forms */
    struct gc_packed_form *packed; /* those forms (tensor/packed.c), freed with the storage */
};

#endif
