/* Index checks, gathers and reorderings on the CPU: the range check of indices, embedding
 * lookup and permute. The last two only move bytes, so they work for every dtype through
 * its element size. */
#include <string.h>

#include "kernels_cpu.h"

void gc_cpu_check_index(const int32_t *index, size_t n, const gc_index_site *site) {
    for (size_t i = 0; i < n; i++)
        if (index[i] < 0 || index[i] >= site->bound) gc_index_site_fail(site, (int64_t)i, false, index[i], NULL);
}

void gc_cpu_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab, size_t dim,
                      gc_dtype dtype) {
    size_t row_bytes = dim * gc_dtype_size(dtype);
    for (size_t i = 0; i < n_ids; i++) {
        char *row = (char *)out + i * row_bytes;
        if (ids[i] < 0 || (size_t)ids[i] >= vocab) memset(row, 0, row_bytes);
        else memcpy(row, (const char *)table + (size_t)ids[i] * row_bytes, row_bytes);
    }
}

/* Copies n elements of `size` bytes, src read every `src_step` elements, into dst
 * contiguously. Called with a constant size (see copy_strided) so that each element
 * copy compiles to one load and one store. */
static inline void copy_elements(char *dst, const char *src, int64_t src_step, int64_t n, size_t size) {
    for (int64_t k = 0; k < n; k++) memcpy(dst + (size_t)k * size, src + (size_t)(k * src_step) * size, size);
}

static void copy_strided(char *dst, const char *src, int64_t src_step, int64_t n, size_t size) {
    switch (size) {
    case 2: copy_elements(dst, src, src_step, n, 2); break;
    case 4: copy_elements(dst, src, src_step, n, 4); break;
    case 8: copy_elements(dst, src, src_step, n, 8); break;
    default: copy_elements(dst, src, src_step, n, size); break;
    }
}

/* Walks the output in order, one row along its last dim per index of the others; the
 * input element of an output index is at sum_i index[i] * in_stride[perm[i]]. */
void gc_cpu_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size) {
    /* The output's shape and its strides into the input, right-aligned on four dims
     * (missing leading dims have size 1). */
    int64_t shape[GC_BCAST_DIMS] = {1, 1, 1, 1}, stride[GC_BCAST_DIMS] = {0, 0, 0, 0};
    int64_t in_stride[GC_BCAST_DIMS], next = 1;
    for (int d = args->ndim - 1; d >= 0; d--) {
        in_stride[d] = next;
        next *= args->in_shape[d];
    }
    int pad = GC_BCAST_DIMS - args->ndim;
    for (int i = 0; i < args->ndim; i++) {
        shape[pad + i] = args->in_shape[args->perm[i]];
        stride[pad + i] = in_stride[args->perm[i]];
    }
    const char *in = x;
    char *out = y;
    int64_t cols = shape[3];
    size_t row_bytes = (size_t)cols * elem_size;
    for (int64_t i0 = 0; i0 < shape[0]; i0++)
        for (int64_t i1 = 0; i1 < shape[1]; i1++)
            for (int64_t i2 = 0; i2 < shape[2]; i2++) {
                const char *row = in + (size_t)(i0 * stride[0] + i1 * stride[1] + i2 * stride[2]) * elem_size;
                if (stride[3] == 1) memcpy(out, row, row_bytes); /* the last dim stays last */
                else copy_strided(out, row, stride[3], cols, elem_size);
                out += row_bytes;
            }
}
