/* Index checks, gathers and reorderings on the CPU: the range check of indices, embedding
 * lookup and permute. The last two only move bytes, so they work for every dtype through
 * its element size, and split their output rows between the threads. */
#include <string.h>

#include "kernels_cpu.h"
#include "thread_pool.h"

void gc_cpu_check_index(const int32_t *index, size_t n, const gc_index_site *site) {
    for (size_t i = 0; i < n; i++)
        if (index[i] < 0 || index[i] >= site->bound) gc_index_site_fail(site, (int64_t)i, false, index[i], NULL);
}

typedef struct embedding_job {
    const char *table;
    const int32_t *ids;
    char *out;
    size_t vocab, row_bytes;
} embedding_job;

/* Copies rows [begin, end) (an id outside the table, which the op's check has already
 * refused, gives a zero row rather than a read outside it). */
static void gather_range(void *arg, int64_t begin, int64_t end) {
    const embedding_job *job = arg;
    for (int64_t i = begin; i < end; i++) {
        char *row = job->out + (size_t)i * job->row_bytes;
        if (job->ids[i] < 0 || (size_t)job->ids[i] >= job->vocab) memset(row, 0, job->row_bytes);
        else memcpy(row, job->table + (size_t)job->ids[i] * job->row_bytes, job->row_bytes);
    }
}

void gc_cpu_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab, size_t dim,
                      gc_dtype dtype) {
    size_t row_bytes = dim * gc_dtype_size(dtype);
    embedding_job job = {table, ids, out, vocab, row_bytes};
    int64_t grain = row_bytes ? (int64_t)((size_t)GC_GRAIN_ELEMENTS * 4 / row_bytes) + 1 : (int64_t)n_ids;
    gc_parallel_for((int64_t)n_ids, grain, gather_range, &job);
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

/* The output's shape and its strides into the input, right-aligned on four dims (missing
 * leading dims have size 1): the input element of an output index is at
 * sum_i index[i] * stride[i]. */
typedef struct permute_job {
    const char *in;
    char *out;
    size_t elem_size;
    int64_t shape[GC_BCAST_DIMS], stride[GC_BCAST_DIMS];
} permute_job;

/* Output rows [begin, end), a row being a run along the last dim. */
static void permute_range(void *arg, int64_t begin, int64_t end) {
    const permute_job *job = arg;
    const int64_t *shape = job->shape, *stride = job->stride;
    size_t row_bytes = (size_t)shape[3] * job->elem_size;
    for (int64_t row = begin; row < end; row++) {
        int64_t i2 = row % shape[2], i1 = row / shape[2] % shape[1], i0 = row / shape[2] / shape[1];
        const char *src = job->in + (size_t)(i0 * stride[0] + i1 * stride[1] + i2 * stride[2]) * job->elem_size;
        char *dst = job->out + (size_t)row * row_bytes;
        if (stride[3] == 1) memcpy(dst, src, row_bytes); /* the last dim stays last */
        else copy_strided(dst, src, stride[3], shape[3], job->elem_size);
    }
}

void gc_cpu_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size) {
    permute_job job = {x, y, elem_size, {1, 1, 1, 1}, {0, 0, 0, 0}};
    int64_t in_stride[GC_BCAST_DIMS], next = 1;
    for (int d = args->ndim - 1; d >= 0; d--) {
        in_stride[d] = next;
        next *= args->in_shape[d];
    }
    int pad = GC_BCAST_DIMS - args->ndim;
    for (int i = 0; i < args->ndim; i++) {
        job.shape[pad + i] = args->in_shape[args->perm[i]];
        job.stride[pad + i] = in_stride[args->perm[i]];
    }
    int64_t cols = job.shape[3], rows = job.shape[0] * job.shape[1] * job.shape[2];
    if (cols == 0) return;
    gc_parallel_for(rows, GC_GRAIN_ELEMENTS / cols + 1, permute_range, &job);
}
