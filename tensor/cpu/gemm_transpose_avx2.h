/* Packing a transposed f32 operand with AVX2: the panel's lanes each hold their depth
 * contiguously (op(b) = q^T in attention's logits, a weight stored [out, in]), and the panel
 * wants each depth step's lanes side by side, so the copy is a transpose. Element by element
 * it cost as much as the product it fed (a text's 16 queries by 32 head dims: 512 strided
 * loads against 512 cycles of multiply-adds); eight lanes by eight steps at a time it is
 * eight loads, 24 shuffles and eight stores. Included by the files built with -mavx2
 * (gemm_avx2.c, gemm_avx512.c), as GEMM_PACK_DEFINE's transposed copy for their f32 panels. */
#ifndef GC_TENSOR_GEMM_TRANSPOSE_AVX2_H
#define GC_TENSOR_GEMM_TRANSPOSE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* dst[d * dst_stride + l] = src[l * src_stride + d] for d < 8 and l < 8, where the rows
 * l >= rows of src (not read) count as zeros. */
static inline void gc_transpose8_f32_avx2(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                                          int64_t rows) {
    __m256 r[8], pairs[8], quads[8];
    for (int l = 0; l < 8; l++) r[l] = l < rows ? _mm256_loadu_ps(src + l * src_stride) : _mm256_setzero_ps();
    for (int l = 0; l < 8; l += 2) { /* lanes l, l + 1 interleaved, within each 128-bit half */
        pairs[l] = _mm256_unpacklo_ps(r[l], r[l + 1]);
        pairs[l + 1] = _mm256_unpackhi_ps(r[l], r[l + 1]);
    }
    for (int l = 0; l < 8; l += 4) { /* four lanes' elements of one step per 128-bit half */
        quads[l] = _mm256_shuffle_ps(pairs[l], pairs[l + 2], 0x44);
        quads[l + 1] = _mm256_shuffle_ps(pairs[l], pairs[l + 2], 0xEE);
        quads[l + 2] = _mm256_shuffle_ps(pairs[l + 1], pairs[l + 3], 0x44);
        quads[l + 3] = _mm256_shuffle_ps(pairs[l + 1], pairs[l + 3], 0xEE);
    }
    for (int d = 0; d < 4; d++) { /* lanes 0-3 and 4-7 joined: steps d (low halves) and d + 4 (high) */
        _mm256_storeu_ps(dst + d * dst_stride, _mm256_permute2f128_ps(quads[d], quads[d + 4], 0x20));
        _mm256_storeu_ps(dst + (d + 4) * dst_stride, _mm256_permute2f128_ps(quads[d], quads[d + 4], 0x31));
    }
}

/* GEMM_PACK_DEFINE's transposed copy for f32 (gemm_pack.h): of a panel of `lanes` lanes whose
 * first `full` are real and lie lane_stride apart, every lane at the whole groups of eight
 * steps, into out [depth, lanes], the missing lanes as zeros; nothing where `lanes` is not a
 * multiple of eight (op(a)'s panels of six rows). */
static inline int64_t gc_pack_transposed_f32_avx2(void *out, const void *panel, int64_t lane_stride, int64_t lanes,
                                                  int64_t full, int64_t depth, int64_t *steps) {
    *steps = lanes % 8 ? 0 : depth / 8 * 8;
    for (int64_t p = 0; p < *steps; p += 8)
        for (int64_t l = 0; l < lanes; l += 8)
            gc_transpose8_f32_avx2((float *)out + p * lanes + l, lanes, (const float *)panel + l * lane_stride + p,
                                   lane_stride, full - l);
    return *steps ? lanes : 0;
}

#endif
