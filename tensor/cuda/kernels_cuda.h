/* The CUDA backend's kernels, callable from C. Same semantics as the CPU kernels
 * (tensor/cpu/kernels_cpu.h); see tensor/backend.h. Each runs on the current device
 * (set by gc_backend_for) and the default stream, and checks its launch. The index checks
 * and the workspace have their own headers (index_check_cuda.h, workspace_cuda.h). */
#ifndef GC_TENSOR_KERNELS_CUDA_H
#define GC_TENSOR_KERNELS_CUDA_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* memory_cuda.c */
void *gc_cuda_raw_alloc(int device_index, size_t nbytes);
void gc_cuda_raw_free(int device_index, void *ptr, size_t nbytes);
void gc_cuda_memory_info(int device_index, size_t *free_bytes, size_t *total_bytes);
void gc_cuda_memcpy_to_host(void *host, const void *src, size_t nbytes);
void gc_cuda_memcpy_from_host(void *dst, const void *host, size_t nbytes);
void gc_cuda_memcpy_same_device(void *dst, const void *src, size_t nbytes);
void gc_cuda_synchronize(int device_index);

/* fill_cuda.cu */
void gc_cuda_fill(void *dst, size_t n, gc_dtype dtype, double value);
void gc_cuda_arange(void *dst, size_t n, gc_dtype dtype, double start, double step);
void gc_cuda_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n);

/* random_cuda.cu */
void gc_cuda_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                    uint64_t offset, double a, double b);

/* elementwise_cuda.cu */
void gc_cuda_unary(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype);
void gc_cuda_binary(gc_binary_op op, const void *a, const void *b, void *out,
                    const gc_broadcast *bc, gc_dtype dtype);
void gc_cuda_binary_scalar(gc_binary_op op, const void *a, double s, bool scalar_first, void *out,
                           size_t n, gc_dtype dtype);

/* matmul_cuda.cu */
void gc_cuda_matmul(const gc_matmul_args *args);

/* reduce_cuda.cu */
void gc_cuda_reduce_last(gc_reduce_op op, const void *x, void *out, int32_t *argmax, size_t rows,
                         size_t cols, gc_dtype dtype);
void gc_cuda_softmax_last(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype, bool log);

/* layernorm_cuda.cu */
void gc_cuda_layernorm(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                       float *rstd, size_t rows, size_t cols, double eps, gc_dtype dtype);

/* layout_cuda.cu */
void gc_cuda_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab, size_t dim,
                       gc_dtype dtype);
void gc_cuda_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size);

/* scatter_cuda.cu */
void gc_cuda_scatter_last(const void *src, const int32_t *index, void *out, size_t rows, size_t cols, gc_dtype dtype);
void gc_cuda_embedding_backward(const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids,
                                size_t vocab, size_t dim, gc_dtype dtype);

/* dropout_cuda.cu */
void gc_cuda_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                 uint64_t offset);

/* score_tile_cuda.cu */
void gc_cuda_score_tile_lse(const gc_score_tile_args *args);
void gc_cuda_score_tile_grad(const gc_score_tile_args *args);

/* optim_cuda.cu */
void gc_cuda_sgd_update(void *param, float *master, const void *grad, float *momentum_buffer, size_t n,
                        gc_dtype dtype, const gc_sgd_hyper *hyper);
void gc_cuda_adamw_update(void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq,
                          size_t n, gc_dtype dtype, const gc_adamw_hyper *hyper);

/* finite_cuda.cu */
void gc_cuda_nonfinite_check(const gc_span *spans, int count, int32_t *flag);

#ifdef __cplusplus
}
#endif
#endif
