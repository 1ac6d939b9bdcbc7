/* The bytes behind one or more tensors. */
#ifndef GC_TENSOR_STORAGE_H
#define GC_TENSOR_STORAGE_H

#include <stddef.h>

#include "gradcache/device.h"
#include "gradcache/memory.h"

struct gc_storage {
    void *data;       /* [nbytes] on `device`, from gc_alloc */
    size_t nbytes;
    gc_device device;
    gc_memory_role role; /* what the bytes are counted as (memory.h) */
    int refcount;     /* number of tensors viewing it */
};

#endif
