/* Scatters for backward rules, on the CPU. */
#include "elem_cpu.h"
#include "kernels_cpu.h"

void gc_cpu_scatter_last(const void *src, const int32_t *index, void *out, size_t rows, size_t cols,
                         gc_dtype dtype) {
    for (size_t r = 0; r < rows; r++) gc_store(out, dtype, r * cols + (size_t)index[r], gc_load(src, dtype, r));
}

/* Rows are added in id order of appearance: a deterministic sum. */
void gc_cpu_embedding_backward(const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids,
                               size_t vocab, size_t dim, gc_dtype dtype) {
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= vocab) continue; /* see backend.h */
        size_t row = (size_t)ids[i] * dim;
        for (size_t j = 0; j < dim; j++)
            gc_store(grad_table, dtype, row + j, gc_load(grad_table, dtype, row + j) + gc_load(grad_out, dtype, i * dim + j));
    }
}
