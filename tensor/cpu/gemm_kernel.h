/* The pieces of the CPU GEMM that depend on the element type and the instruction set: how
 * operands are packed into panels, and the micro-kernel that multiplies one panel of op(a)
 * by one of op(b) into a tile of c. matmul_cpu.c drives them (blocking, threads, batches).
 *
 * Every variant computes each element of c the same way wherever its tile lies (the same
 * products, summed in the same order), so the split of the work never changes a result.
 * Variants differ from each other only by rounding: the SIMD ones fuse each multiply-add. */
#ifndef GC_TENSOR_GEMM_KERNEL_H
#define GC_TENSOR_GEMM_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"
#include "gradcache/dtype.h"

/* Where a micro-kernel stores its tiles: c [rows, cols] (row stride ldc; any number of rows,
 * taken mr at a time, at most nr columns) = alpha * (the product) + beta * c_in, where c_in is
 * c itself (c_in = c, ldc_in = ldc) or one row read for every row (ldc_in = 0: a bias, which
 * c then need not hold first). c_in is not read when beta is 0. */
typedef struct gc_gemm_tile_out {
    void *c;
    int64_t ldc;
    const void *c_in;
    int64_t ldc_in;
    int64_t rows, cols;
    float alpha, beta;
} gc_gemm_tile_out;

typedef struct gc_gemm_kernel {
    size_t size; /* bytes per element */
    int mr, nr;  /* the micro-tile: mr rows of op(a) by nr columns of op(b) */
    /* Pack `width` lanes (rows of op(a) for pack_a, columns of op(b) for pack_b) of `depth`
     * elements, where lane l, depth p is src[l * lane_stride + p * depth_stride], into
     * panels of mr (pack_a) or nr (pack_b) lanes: dst[panel][p][lane], zero-padded to a
     * whole panel. */
    void (*pack_a)(void *dst, const void *src, int64_t lane_stride, int64_t depth_stride, int64_t width,
                   int64_t depth);
    void (*pack_b)(void *dst, const void *src, int64_t lane_stride, int64_t depth_stride, int64_t width,
                   int64_t depth);
    /* The tiles `out` of pa @ pb, from op(a)'s packed panels (mr rows each, one after the
     * other) and one panel of op(b), each `depth` deep. `next` is a panel of op(b) (as deep)
     * to bring into cache meanwhile, a panel row per step, or pb itself: a product of a few rows
     * (one text) streams a weight from memory faster when the panels are fetched ahead of
     * the multiply (SIMD variants; the portable one ignores it). */
    void (*tile)(const void *pa, const void *pb, const void *next, int64_t depth, const gc_gemm_tile_out *out);
    /* The same with op(a) read where it lies instead of from packed panels: row i, depth p
     * at a[i * lda + p] (op(a) with its depth contiguous), every element of c bit for bit what
     * `tile` gives on packed panels. It saves packing op(a), a gather of mr rows at a
     * time that costs about a fifth of a product 128 columns wide. Its tiles may be taller
     * than mr (AVX-512's are 12 rows: gemm_simd_body.h). NULL where the variant has none (it
     * then packs). */
    void (*tile_in_place)(const void *a, int64_t lda, const void *pb, const void *next, int64_t depth,
                          const gc_gemm_tile_out *out);
} gc_gemm_kernel;

/* The variant for f32 or f64 on `isa` (which must be available). */
const gc_gemm_kernel *gc_gemm_kernel_for(gc_dtype dtype, gc_cpu_isa isa);

extern const gc_gemm_kernel gc_gemm_portable_f32, gc_gemm_portable_f64;
#ifdef GC_HAVE_X86_KERNELS
extern const gc_gemm_kernel gc_gemm_avx2_f32, gc_gemm_avx2_f64, gc_gemm_avx512_f32, gc_gemm_avx512_f64;
#endif

#endif
