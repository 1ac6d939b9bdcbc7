/* Tensors: contiguous, row-major, reference-counted views of shared storage.
 *
 * A tensor is a small struct (shape, dtype, device, an element offset) pointing at a
 * storage that holds the bytes. Views (a slice along dim 0, a reshape) share the
 * storage and keep it alive; the storage is freed when its last view is released.
 * Every tensor is contiguous, so a kernel sees a plain array; ops that reorder data
 * (transpose, permute) make a contiguous copy.
 *
 * Ownership: every function that returns a gc_tensor* returns a new reference, which
 * the caller releases with gc_tensor_release(). Functions never take over a reference
 * they are given. Tensors are not shared between threads.
 */
#ifndef GRADCACHE_TENSOR_H
#define GRADCACHE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/device.h"
#include "gradcache/dtype.h"
#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GC_MAX_DIMS 4

/* Shape literal for the functions that take (ndim, shape): gc_zeros(GC_SHAPE(2, 3), ...).
 * GC_SHAPE() with no argument is not allowed; use (0, NULL) for a 0-dim scalar. */
#define GC_SHAPE(...)                                                           \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

typedef struct gc_storage gc_storage;

typedef struct gc_tensor {
    gc_storage *storage;          /* shared bytes; views of one storage share it */
    size_t offset;                /* index of this tensor's first element in the storage */
    int ndim;                     /* 0 (a scalar) .. GC_MAX_DIMS */
    int64_t shape[GC_MAX_DIMS];   /* [ndim], the rest are 1 */
    gc_dtype dtype;
    gc_device device;
    int refcount;
    /* Owned by a higher layer (autograd); the tensor layer only frees it through
     * ext_free when the last reference goes. NULL for a plain tensor. */
    void *ext;
    void (*ext_free)(void *ext);
} gc_tensor;

/* --- creation (the returned tensors own fresh storage; NULL on a recoverable error) --- */
gc_tensor *gc_empty(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device);
gc_tensor *gc_zeros(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device);
gc_tensor *gc_ones(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device);
gc_tensor *gc_full(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device, double value);
/* [n]: start, start + step, ... */
gc_tensor *gc_arange(int64_t n, double start, double step, gc_dtype dtype, gc_device device);
/* Copies numel elements of `dtype` from host memory. */
gc_tensor *gc_from_host(const void *data, int ndim, const int64_t *shape, gc_dtype dtype,
                        gc_device device);
/* Same shape, dtype and device as x: uninitialised, or zeros. */
gc_tensor *gc_empty_like(const gc_tensor *x);
gc_tensor *gc_zeros_like(const gc_tensor *x);
/* A 0-dim tensor holding one value. */
gc_tensor *gc_scalar(double value, gc_dtype dtype, gc_device device);

/* --- reference counting --- */
gc_tensor *gc_tensor_retain(gc_tensor *t); /* returns t */
void gc_tensor_release(gc_tensor *t);      /* NULL is a no-op */

/* --- views (share storage, no copy) --- */
/* Rows [start, end) along dim 0. */
gc_tensor *gc_slice0(const gc_tensor *t, int64_t start, int64_t end);
/* Same elements, new shape; one entry may be -1 (inferred). */
gc_tensor *gc_reshape(const gc_tensor *t, int ndim, const int64_t *shape);

/* --- copies --- */
gc_tensor *gc_to_device(const gc_tensor *t, gc_device device); /* always a new storage */
gc_tensor *gc_clone(const gc_tensor *t);
/* Sets every element of t to value, in place (recorded by no tape: for buffers). */
void gc_fill_(gc_tensor *t, double value);
/* Copies src into dst (same shape and dtype; any devices). Returns GC_OK or an error. */
gc_status gc_copy_(gc_tensor *dst, const gc_tensor *src);
/* Copies all elements into host memory (numel * dtype size bytes). */
void gc_copy_to_host(const gc_tensor *t, void *host);
/* The elements converted to double, into host memory (numel doubles). */
void gc_to_host_f64(const gc_tensor *t, double *host);
/* The value of a one-element tensor. */
double gc_item(const gc_tensor *t);

/* --- queries --- */
int64_t gc_numel(const gc_tensor *t);
size_t gc_nbytes(const gc_tensor *t);
/* Address of the first element (device memory for a CUDA tensor). */
void *gc_data(const gc_tensor *t);
bool gc_same_shape(const gc_tensor *a, const gc_tensor *b);
/* "[2, 3] f32 cpu" into buf; returns buf. */
const char *gc_tensor_str(const gc_tensor *t, char *buf, int size);
/* "[2, 3]" into buf; returns buf. */
const char *gc_shape_str(int ndim, const int64_t *shape, char *buf, int size);

/* --- versions, and the forms kept with a weight ---
 * A storage counts the writes made to its bytes, as PyTorch's version counter: every op that
 * writes into an existing tensor (gc_fill_, gc_copy_, gc_add_inplace, gc_scale_inplace,
 * gc_matmul_into, the optimizer updates, the loads built on gc_copy_, the collectives'
 * outputs) increments the version that all views of that storage share. A form
 * derived from the bytes and kept with them (a weight's packed panels) is used at the version
 * it was made at only, so it is never stale. Code that writes through gc_data() itself (a
 * receive buffer, a file read in place, a test setting an element) calls
 * gc_tensor_mark_written(t) once it is done, before t is read again. */
uint64_t gc_tensor_version(const gc_tensor *t);
void gc_tensor_mark_written(gc_tensor *t);
/* Marks t's storage as a weight (gc_linear does it for its [out, in] matrix). A 2-D matmul
 * with a weight as op(b) (transposed, as a linear layer's forward takes it, or not, as its
 * input gradient does) runs on the library's own GEMM on the CPU, whatever the BLAS, and
 * keeps op(b) packed into that GEMM's panels once it has been multiplied twice at one version
 * (by a GradCache step's chunks, or a stream of inference batches), repacked in place at the
 * first product after a write. A plain training step multiplies each form once per version,
 * so it keeps none. The panels are counted (packed_bytes of gc_memory_stats, outside
 * live_bytes) and freed with the storage. On CUDA nothing is packed (cuBLAS takes the
 * operand as it lies); the version counts there too. */
void gc_tensor_set_weight(gc_tensor *t);
bool gc_tensor_is_weight(const gc_tensor *t);
/* Whether weights keep their packed panels (default: yes). Off, every product packs its own,
 * bit for bit the same results, and a weight's panels kept before are freed at its next
 * product. */
void gc_set_weight_packing(bool enabled);

/* Whether attention layers run fused (gc_attention_fused: tile by tile, no [B, H, T, T]
 * scores) or composed of matmul, softmax_scaled and dropout (the default, faster on the CPU
 * at the trainer's shapes; GC_FUSED_ATTENTION=1 makes fused the default). Both compute the
 * same function with the same dropout masks; their results differ by rounding. Read by a
 * forward when it makes its attention inputs. */
void gc_set_fused_attention(bool enabled);
bool gc_fused_attention(void);

#ifdef __cplusplus
}
#endif
#endif
