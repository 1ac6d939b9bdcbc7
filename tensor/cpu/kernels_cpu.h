/* The CPU backend's kernels: plain, readable C, the reference for every other backend.
 * See tensor/backend.h for what each one computes. */
#ifndef GC_TENSOR_KERNELS_CPU_H
#define GC_TENSOR_KERNELS_CPU_H

#include "../backend.h"
#include "cpu_isa.h"

/* memory_cpu.c */
void *gc_cpu_raw_alloc(int device_index, size_t nbytes);
void gc_cpu_raw_free(int device_index, void *ptr, size_t nbytes);
void gc_cpu_memory_info(int device_index, size_t *free_bytes, size_t *total_bytes);
void gc_cpu_memcpy(void *dst, const void *src, size_t nbytes);
void gc_cpu_synchronize(int device_index);

/* fill_cpu.c */
void gc_cpu_fill(void *dst, size_t n, gc_dtype dtype, double value);
void gc_cpu_arange(void *dst, size_t n, gc_dtype dtype, double start, double step);
void gc_cpu_cast(const void *src, gc_dtype src_dtype, void *dst, gc_dtype dst_dtype, size_t n);

/* random_cpu.c */
void gc_cpu_random(void *dst, size_t n, gc_dtype dtype, gc_random_kind kind, uint64_t seed,
                   uint64_t offset, double a, double b);

/* elementwise_cpu.c */
/* The f32 gelu (erf form), or its derivative, of x[0 .. n) into y with the loop of `isa`
 * (all give the same bits), on the calling thread: for tests. */
void gc_cpu_gelu_erf_on(gc_cpu_isa isa, bool derivative, const float *x, float *y, size_t n);
void gc_cpu_unary(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype);
void gc_cpu_unary_grad(gc_unary_op derivative, const void *x, const void *g, void *dx, size_t n, gc_dtype dtype);
/* g [n] times the f32 gelu (erf form)'s derivative at x [n], into dx, with the loop of
 * `isa` (all give the same bits), on the calling thread: for tests. */
void gc_cpu_gelu_erf_grad_on(gc_cpu_isa isa, const float *x, const float *g, float *dx, size_t n);
void gc_cpu_binary(gc_binary_op op, const void *a, const void *b, void *out,
                   const gc_broadcast *bc, gc_dtype dtype);
void gc_cpu_binary_scalar(gc_binary_op op, const void *a, double s, bool scalar_first, void *out,
                          size_t n, gc_dtype dtype);

/* matmul_cpu.c: the BLAS when the build has one and GC_BLAS is not 0, else the own GEMM on
 * the selected instruction set. */
void gc_cpu_matmul(const gc_matmul_args *args);
/* The library's own GEMM on `isa` (which must be available): the reference. */
void gc_cpu_matmul_own(const gc_matmul_args *args, gc_cpu_isa isa);
#ifdef GC_HAVE_BLAS
/* matmul_blas.c: f32 and f64 through the CBLAS (other dtypes: not supported). */
void gc_cpu_matmul_blas(const gc_matmul_args *args);
bool gc_cpu_blas_enabled(void);
#endif

/* reduce_cpu.c */
void gc_cpu_reduce_last(gc_reduce_op op, const void *x, void *out, int32_t *argmax, size_t rows,
                        size_t cols, gc_dtype dtype);
void gc_cpu_sum_middle(const void *x, void *out, size_t outer, size_t mid, size_t inner, gc_dtype dtype);
void gc_cpu_softmax_last(const void *x, void *y, size_t rows, size_t cols, gc_dtype dtype, bool log);

/* layernorm_cpu.c */
void gc_cpu_layernorm(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                      float *rstd, size_t rows, size_t cols, double eps, gc_dtype dtype);
void gc_cpu_layernorm_backward(const void *x, const void *gamma, const void *g, void *dx, void *g_xhat, size_t rows,
                               size_t cols, double eps, gc_dtype dtype);

/* layout_cpu.c */
void gc_cpu_check_index(const int32_t *index, size_t n, const gc_index_site *site);
void gc_cpu_embedding(const void *table, const int32_t *ids, void *out, size_t n_ids, size_t vocab, size_t dim,
                      gc_dtype dtype);
void gc_cpu_permute(const void *x, void *y, const gc_permute_args *args, size_t elem_size);

/* scatter_cpu.c */
void gc_cpu_scatter_last(const void *src, const int32_t *index, void *out, size_t rows, size_t cols, gc_dtype dtype);
void gc_cpu_embedding_backward(const void *grad_out, const int32_t *ids, void *grad_table, size_t n_ids,
                               size_t vocab, size_t dim, gc_dtype dtype);

/* dropout_cpu.c: the Philox words of the selected instruction set */
void gc_cpu_dropout(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale, uint64_t seed,
                    uint64_t offset);
/* The same with the words of `isa` (which must be available): bitwise the same result. */
void gc_cpu_dropout_on(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale,
                       uint64_t seed, uint64_t offset, gc_cpu_isa isa);

/* score_tile_cpu.c */
void gc_cpu_score_tile_lse(const gc_score_tile_args *args);
void gc_cpu_score_tile_grad(const gc_score_tile_args *args);

/* optim_cpu.c */
void gc_cpu_sgd_update(void *param, float *master, const void *grad, float *momentum_buffer, size_t n,
                       gc_dtype dtype, const gc_sgd_hyper *hyper);
void gc_cpu_adamw_update(void *param, float *master, const void *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                         gc_dtype dtype, const gc_adamw_hyper *hyper);
/* One AdamW step of f32 param [n] (no master copy) with the loop of `isa` (all give the
 * same bits), on the calling thread: for tests. */
void gc_cpu_adamw_f32_on(gc_cpu_isa isa, float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                         size_t n, const gc_adamw_hyper *hyper);

/* finite_cpu.c */
void gc_cpu_nonfinite_check(const gc_span *spans, int count, int32_t *flag);

#endif
