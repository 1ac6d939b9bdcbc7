/* The bytes behind one or more tensors. */
#ifndef GC_TENSOR_STORAGE_H
#define GC_TENSOR_STORAGE_H

#include <stddef.h>

#include "gradcache/device.h"

struct gc_storage {
    void *data;       /* [nbytes] on `device`, from gc_alloc */
    size_t nbytes;
    gc_device device;
    int refcount;     /* number of tensors viewing it */
};

#endif
