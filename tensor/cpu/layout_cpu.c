/* STUB: to be written. */
#include "gradcache/error.h"
#include "kernels_cpu.h"

int64_t gc_cpu_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids,
                         size_t vocab, size_t dim, gc_dtype dtype) {
    gc_fatal("gc_cpu_embedding: not implemented");
}
void gc_cpu_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size) {
    gc_fatal("gc_cpu_permute: not implemented");
}
