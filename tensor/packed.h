/* A weight's packed forms (gradcache/tensor.h, gc_tensor_set_weight): op(b) of a product
 * packed by the backend once and kept with the weight's storage while its version holds. */
#ifndef GC_TENSOR_PACKED_H
#define GC_TENSOR_PACKED_H

#include "backend.h"
#include "storage.h"

/* For the product `args` with op(b) from b: marks args->b_is_weight when b is a weight and
 * sets args->packed_b to its kept panels when it has them (making or refreshing them on its
 * second product at one version). Nothing kept when packing is off, the backend has no
 * packing, or the memory for the panels is refused (the product packs its own then). */
void gc_packed_prepare(const gc_tensor *b, gc_matmul_args *args);
/* Frees the storage's forms (when the storage goes). */
void gc_packed_free(gc_storage *storage);

#endif
