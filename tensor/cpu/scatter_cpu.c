/* Scatters for backward rules, on the CPU. */
#include "elem_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

void gc_cpu_scatter_last(const void *src, const int32_t *index, void *out, size_t rows, size_t cols,
                         gc_dtype dtype) {
    for (size_t r = 0; r < rows; r++) gc_store(out, dtype, r * cols + (size_t)index[r], gc_load(src, dtype, r));
}

typedef struct embedding_backward_job {
    const char *grad_out; /* [n_ids, dim] of dtype */
    const int32_t *ids;   /* [n_ids] */
    char *grad_table;     /* [vocab, dim] of dtype's working dtype (f32 for f16 and bf16) */
    size_t n_ids, vocab, dim;
    gc_dtype dtype;
} embedding_backward_job;

/* Columns [begin, end) of every row: the threads split the columns, never the ids, so each
 * sum adds the rows in id order of appearance whatever the split (a deterministic sum). */
static void accumulate_columns(void *arg, int64_t begin, int64_t end) {
    const embedding_backward_job *job = arg;
    size_t dim = job->dim;
    gc_dtype table_dtype = gc_working_dtype(job->dtype);
    for (size_t i = 0; i < job->n_ids; i++) {
        if (job->ids[i] < 0 || (size_t)job->ids[i] >= job->vocab) continue; /* see backend.h */
        size_t row = (size_t)job->ids[i] * dim;
        if (job->dtype == GC_F32) {
            const float *from = (const float *)job->grad_out + i * dim;
            float *to = (float *)job->grad_table + row;
            for (int64_t j = begin; j < end; j++) to[j] += from[j];
            continue;
        }
        for (int64_t j = begin; j < end; j++)
            gc_store(job->grad_table, table_dtype, row + (size_t)j,
                     gc_load(job->grad_table, table_dtype, row + (size_t)j) +
                         gc_load(job->grad_out, job->dtype, i * dim + (size_t)j));
    }
}

/* Cache lines [first, last) of columns (16 elements each: a line of f32, more for narrower
 * dtypes), so that no two threads write one line. */
static void accumulate_lines(void *arg, int64_t first, int64_t last) {
    const embedding_backward_job *job = arg;
    int64_t end = last * 16 < (int64_t)job->dim ? last * 16 : (int64_t)job->dim;
    accumulate_columns(arg, first * 16, end);
}

void gc_cpu_embedding_backward(const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids,
                               size_t vocab, size_t dim, gc_dtype dtype) {
    embedding_backward_job job = {grad_out, ids, grad_table, n_ids, vocab, dim, dtype};
    int64_t lines = ((int64_t)dim + 15) / 16, per_line = (int64_t)n_ids * 16;
    gc_parallel_for(lines, per_line ? GC_GRAIN_ELEMENTS / per_line + 1 : lines, accumulate_lines, &job);
}
