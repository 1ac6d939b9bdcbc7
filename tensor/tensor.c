/* Tensor objects: creation, reference counting, views, copies and queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "gradcache/tensor.h"
#include "packed.h"
#include "record.h"
#include "storage.h"

const char *gc_shape_str(int ndim, const int64_t *shape, char *buf, int size) {
    int used = snprintf(buf, (size_t)size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += snprintf(buf + used, (size_t)(size - used), i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size) snprintf(buf + used, (size_t)(size - used), "]");
    return buf;
}

const char *gc_tensor_str(const gc_tensor *t, char *buf, int size) {
    char shape[96], device[16];
    snprintf(buf, (size_t)size, "%s %s %s", gc_shape_str(t->ndim, t->shape, shape, sizeof shape),
             gc_dtype_name(t->dtype), gc_device_str(t->device, device, sizeof device));
    return buf;
}

static int64_t shape_numel(const char *op, int ndim, const int64_t *shape) {
    char text[96];
    if (ndim < 0 || ndim > GC_MAX_DIMS) gc_fatal("%s: %d dims, at most %d are supported", op, ndim, GC_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) gc_fatal("%s: negative size in shape %s", op, gc_shape_str(ndim, shape, text, sizeof text));
        numel *= shape[i];
    }
    return numel;
}

int64_t gc_numel(const gc_tensor *t) { return shape_numel("numel", t->ndim, t->shape); }
size_t gc_nbytes(const gc_tensor *t) { return (size_t)gc_numel(t) * gc_dtype_size(t->dtype); }
void *gc_data(const gc_tensor *t) { return (char *)t->storage->data + t->offset * gc_dtype_size(t->dtype); }

bool gc_same_shape(const gc_tensor *a, const gc_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* A tensor header over `storage` (whose reference it takes over). */
static gc_tensor *tensor_over(gc_storage *storage, size_t offset, int ndim, const int64_t *shape,
                              gc_dtype dtype) {
    gc_tensor *t = calloc(1, sizeof *t);
    if (!t) gc_fatal("tensor: out of host memory for a tensor header");
    t->storage = storage;
    t->offset = offset;
    t->ndim = ndim;
    for (int i = 0; i < GC_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->dtype = dtype;
    t->device = storage->device;
    t->refcount = 1;
    return t;
}

gc_tensor *gc_empty(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device) {
    size_t nbytes = (size_t)shape_numel("empty", ndim, shape) * gc_dtype_size(dtype);
    gc_memory_role role = gc_memory_get_role();
    void *data = gc_alloc(device, nbytes, role);
    if (!data) return NULL;
    gc_storage *storage = malloc(sizeof *storage);
    if (!storage) gc_fatal("tensor: out of host memory for a storage header");
    *storage = (gc_storage){.data = data, .nbytes = nbytes, .device = device, .role = role, .refcount = 1};
    return tensor_over(storage, 0, ndim, shape, dtype);
}

void gc_fill_(gc_tensor *t, double value) {
    gc_backend_for(t->device)->fill(gc_data(t), (size_t)gc_numel(t), t->dtype, value);
    gc_tensor_mark_written(t);
}

gc_tensor *gc_full(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device, double value) {
    gc_tensor *t = gc_empty(ndim, shape, dtype, device);
    if (t) gc_fill_(t, value);
    return t;
}

gc_tensor *gc_zeros(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device) {
    return gc_full(ndim, shape, dtype, device, 0.0);
}

gc_tensor *gc_ones(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device) {
    return gc_full(ndim, shape, dtype, device, 1.0);
}

gc_tensor *gc_empty_like(const gc_tensor *x) {
    return x ? gc_empty(x->ndim, x->shape, x->dtype, x->device) : NULL;
}

gc_tensor *gc_zeros_like(const gc_tensor *x) {
    return x ? gc_zeros(x->ndim, x->shape, x->dtype, x->device) : NULL;
}

gc_tensor *gc_scalar(double value, gc_dtype dtype, gc_device device) {
    return gc_full(0, NULL, dtype, device, value);
}

gc_tensor *gc_arange(int64_t n, double start, double step, gc_dtype dtype, gc_device device) {
    gc_tensor *t = gc_empty(1, &n, dtype, device);
    if (t) gc_backend_for(device)->arange(gc_data(t), (size_t)n, dtype, start, step);
    return t;
}

gc_tensor *gc_from_host(const void *data, int ndim, const int64_t *shape, gc_dtype dtype, gc_device device) {
    gc_tensor *t = gc_empty(ndim, shape, dtype, device);
    if (t) gc_backend_for(device)->memcpy_from_host(gc_data(t), data, gc_nbytes(t));
    return t;
}

gc_tensor *gc_tensor_retain(gc_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void gc_tensor_release(gc_tensor *t) {
    if (!t) return;
    if (t->refcount <= 0) gc_fatal("tensor: release of a tensor that was already freed");
    if (--t->refcount > 0) return;
    if (t->ext_free) t->ext_free(t->ext);
    gc_storage *storage = t->storage;
    if (--storage->refcount == 0) {
        gc_packed_free(storage);
        gc_free(storage->device, storage->data, storage->nbytes, storage->role);
        free(storage);
    }
    free(t);
}

/* --- views --- */

gc_tensor *gc_slice0(const gc_tensor *t, int64_t start, int64_t end) {
    if (!t) return NULL;
    char text[128];
    if (t->ndim < 1) gc_fatal("slice0: cannot slice a 0-dim tensor");
    if (start < 0 || end < start || end > t->shape[0])
        gc_fatal("slice0: rows [%lld, %lld) out of range for %s", (long long)start, (long long)end,
                 gc_tensor_str(t, text, sizeof text));
    int64_t shape[GC_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = end - start;
    size_t row = 1; /* elements per row, also when there are no rows */
    for (int d = 1; d < t->ndim; d++) row *= (size_t)t->shape[d];
    t->storage->refcount++;
    gc_tensor *view = tensor_over(t->storage, t->offset + (size_t)start * row, t->ndim, shape, t->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_SLICE0, .n_inputs = 1, .inputs = (const gc_tensor *[]){t},
                                        .output = view, .params.slice = {start, end}});
}

gc_tensor *gc_reshape(const gc_tensor *t, int ndim, const int64_t *shape) {
    if (!t) return NULL;
    char from[128], to[96];
    if (ndim < 0 || ndim > GC_MAX_DIMS) gc_fatal("reshape: %d dims, at most %d are supported", ndim, GC_MAX_DIMS);
    int64_t resolved[GC_MAX_DIMS], known = 1;
    int inferred = -1;
    for (int i = 0; i < ndim; i++) {
        resolved[i] = shape[i];
        if (shape[i] == -1 && inferred < 0) inferred = i;
        else if (shape[i] < 0) gc_fatal("reshape: bad shape %s", gc_shape_str(ndim, shape, to, sizeof to));
        else known *= shape[i];
    }
    int64_t numel = gc_numel(t);
    if (inferred >= 0) resolved[inferred] = known ? numel / known : 0;
    if (shape_numel("reshape", ndim, resolved) != numel)
        gc_fatal("reshape: %s cannot be viewed as %s", gc_tensor_str(t, from, sizeof from),
                 gc_shape_str(ndim, shape, to, sizeof to));
    t->storage->refcount++;
    gc_tensor *view = tensor_over(t->storage, t->offset, ndim, resolved, t->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_RESHAPE, .n_inputs = 1, .inputs = (const gc_tensor *[]){t},
                                        .output = view});
}

/* --- copies --- */

gc_status gc_copy_(gc_tensor *dst, const gc_tensor *src) {
    char a[128], b[128];
    if (!gc_same_shape(dst, src) || dst->dtype != src->dtype)
        gc_fatal("copy_: destination %s and source %s differ in shape or dtype",
                 gc_tensor_str(dst, a, sizeof a), gc_tensor_str(src, b, sizeof b));
    size_t nbytes = gc_nbytes(src);
    bool src_cpu = src->device.type == GC_DEVICE_CPU, dst_cpu = dst->device.type == GC_DEVICE_CPU;
    if (gc_device_equal(src->device, dst->device)) {
        gc_backend_for(dst->device)->memcpy_same_device(gc_data(dst), gc_data(src), nbytes);
    } else if (src_cpu) {
        gc_backend_for(dst->device)->memcpy_from_host(gc_data(dst), gc_data(src), nbytes);
    } else if (dst_cpu) {
        gc_device_copy_to_host(src->device, gc_data(dst), gc_data(src), nbytes);
    } else { /* between two GPUs: through the host, which is simple and rare here */
        void *host = malloc(nbytes ? nbytes : 1);
        if (!host) {
            gc_set_error(GC_ERR_OUT_OF_MEMORY, "copy_: no host memory to stage %zu bytes", nbytes);
            return GC_ERR_OUT_OF_MEMORY;
        }
        gc_device_copy_to_host(src->device, host, gc_data(src), nbytes);
        gc_backend_for(dst->device)->memcpy_from_host(gc_data(dst), host, nbytes);
        free(host);
    }
    gc_tensor_mark_written(dst);
    return GC_OK;
}

gc_tensor *gc_to_device(const gc_tensor *t, gc_device device) {
    if (!t) return NULL;
    gc_tensor *copy = gc_empty(t->ndim, t->shape, t->dtype, device);
    if (copy && gc_copy_(copy, t) != GC_OK) {
        gc_tensor_release(copy);
        return NULL;
    }
    return copy;
}

gc_tensor *gc_clone(const gc_tensor *t) { return t ? gc_to_device(t, t->device) : NULL; }

void gc_copy_to_host(const gc_tensor *t, void *host) {
    gc_device_copy_to_host(t->device, host, gc_data(t), gc_nbytes(t));
}

void gc_to_host_f64(const gc_tensor *t, double *host) {
    int64_t numel = gc_numel(t);
    if (t->dtype == GC_F64) {
        gc_copy_to_host(t, host);
        return;
    }
    /* Stage the raw elements at the end of the caller's buffer (a double is at least as
     * wide as any element), then widen them front to back, which never overwrites an
     * element not yet read. */
    size_t size = gc_dtype_size(t->dtype);
    char *raw = (char *)host + (size_t)numel * (sizeof(double) - size);
    gc_copy_to_host(t, raw);
    for (int64_t i = 0; i < numel; i++) host[i] = gc_element_f64(raw, t->dtype, i);
}

double gc_item(const gc_tensor *t) {
    char text[128];
    if (gc_numel(t) != 1) gc_fatal("item: %s has %lld elements, not 1", gc_tensor_str(t, text, sizeof text), (long long)gc_numel(t));
    double value;
    gc_to_host_f64(t, &value);
    return value;
}
