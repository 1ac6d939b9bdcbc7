/* The CPU backend's kernels: plain, readable C, the reference for every other backend.
 * gc_cpu_<name> for every kernel of tensor/backend_kernels.h (which says what each computes),
 * the fused ones included, and the variants the tests compare them with. */
#ifndef GC_TENSOR_KERNELS_CPU_H
#define GC_TENSOR_KERNELS_CPU_H

#include "../backend.h"
#include "cpu_isa.h"

#define GC_CPU_KERNEL(name, params) void gc_cpu_##name params;
GC_KERNELS(GC_CPU_KERNEL)
GC_FUSED_KERNELS(GC_CPU_KERNEL)
GC_PACKING_KERNELS(GC_CPU_KERNEL)
#undef GC_CPU_KERNEL

/* memory_cpu.c */
void *gc_cpu_raw_alloc(int device_index, size_t nbytes);
void gc_cpu_raw_free(int device_index, void *ptr, size_t nbytes);
void gc_cpu_trim(int device_index);
void gc_cpu_memory_info(int device_index, size_t *free_bytes, size_t *total_bytes);
void gc_cpu_memcpy(void *dst, const void *src, size_t nbytes);
void gc_cpu_synchronize(int device_index);

/* elementwise_cpu.c: the f32 gelu (erf form), or its derivative, of x[0 .. n) into y with the
 * loop of `isa` (all give the same bits), on the calling thread: for tests. */
void gc_cpu_gelu_erf_on(gc_cpu_isa isa, bool derivative, const float *x, float *y, size_t n);
/* g [n] times the f32 gelu (erf form)'s derivative at x [n], into dx, with the loop of
 * `isa` (all give the same bits), on the calling thread: for tests. */
void gc_cpu_gelu_erf_grad_on(gc_cpu_isa isa, const float *x, const float *g, float *dx, size_t n);
/* reduce_cpu.c: softmax_cpu.h's f32 row of gc_softmax_scaled (bias [cols] or NULL; staged
 * when scale != 1 or a bias) with the build of `isa` (all give the same bits), on the
 * calling thread: for tests. */
void gc_cpu_softmax_row_f32_on(gc_cpu_isa isa, const float *x, const float *bias, float scale, bool staged, float *y,
                               size_t cols);
/* Queries gc_cpu_softmax_columns_f32_on takes per pass (their maxima and sums on the stack). */
#define GC_SOFTMAX_COLUMNS 64
/* reduce_cpu.c: softmax_cpu.h's rows of `queries` queries at once, stored down columns
 * (x[t * stride + q]), with the build of `isa`: each the bits of the row function. */
void gc_cpu_softmax_columns_f32_on(gc_cpu_isa isa, const float *x, const float *bias, float scale, bool staged,
                                   float *y, size_t places, size_t stride, size_t queries);
/* layernorm_cpu.c: layernorm_cpu.h's f32 rows, forward (its mean and rstd returned) and
 * backward (dx, g_xhat or NULL), with the build of `isa` (all give the same bits), on the
 * calling thread: for tests. */
void gc_cpu_layernorm_row_f32_on(gc_cpu_isa isa, const float *x, const float *gamma, const float *beta, float *y,
                                 size_t cols, double eps, double *mean, double *rstd);
void gc_cpu_layernorm_grad_row_f32_on(gc_cpu_isa isa, const float *x, const float *gamma, const float *g, float *dx,
                                      float *g_xhat, size_t cols, double eps);

/* matmul_cpu.c's gc_cpu_matmul takes the BLAS when the build has one and GC_BLAS is not 0,
 * else the own GEMM on the selected instruction set; a weight's products (args->b_is_weight)
 * always the own GEMM, which can take its panels packed once (args->packed_b). The library's own GEMM on `isa` (which
 * must be available): the reference. */
void gc_cpu_matmul_own(const gc_matmul_args *args, gc_cpu_isa isa);
/* matmul_cpu.c: one f32 or f64 product (batch 1, no bias row, op(b) not packed) with the own
 * GEMM on the calling thread, a, b and c stored with the row strides lda, ldb and ldc (a is
 * [m, k], or [k, m] when trans_a; b likewise): blocks of wider matrices, read and written
 * where they lie (attention_packed_cpu.c's heads of the packed rows). Each element gets the
 * bits gc_cpu_matmul_own gives on contiguous copies. */
void gc_cpu_matmul_strided(const gc_matmul_args *args, int64_t lda, int64_t ldb, int64_t ldc, gc_cpu_isa isa);
/* The own GEMM sums each element's products in blocks of this many along k, in order, each
 * block one chain of multiply-adds from 0, then added to the blocks before it (c = block + c). */
#define GC_GEMM_DEPTH_BLOCK 256
#ifdef GC_HAVE_BLAS
/* matmul_blas.c: f32 and f64 through the CBLAS (other dtypes: not supported). */
void gc_cpu_matmul_blas(const gc_matmul_args *args);
bool gc_cpu_blas_enabled(void);
#endif

/* dropout_cpu.c's gc_cpu_dropout takes the Philox words of the selected instruction set; the
 * same with the words of `isa` (which must be available): bitwise the same result. */
void gc_cpu_dropout_on(const void *x, void *y, size_t n, gc_dtype dtype, uint32_t threshold, double scale,
                       uint64_t seed, uint64_t offset, gc_cpu_isa isa);

/* optim_cpu.c: one AdamW step of f32 param [n] (no master copy) with the loop of `isa` (all
 * give the same bits), on the calling thread: for tests. */
void gc_cpu_adamw_f32_on(gc_cpu_isa isa, float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                         size_t n, const gc_adamw_hyper *hyper);

#endif
