/* The portable GEMM micro-kernels: plain C that any compiler vectorises for its baseline
 * target (SSE2 on x86-64). The tile is accumulated in a local array whose loops are fully
 * unrolled, so that gcc keeps it in vector registers: 4 x 16 f32 (and 4 x 8 f64, the same
 * bytes) measured fastest with 16 SSE registers. The reference for the SIMD variants. */
#include "gemm_kernel.h"
#include "gemm_pack.h"

#define DEFINE_PORTABLE_GEMM(T, NAME, MR, NR)                                                                \
    GEMM_PACK_DEFINE(T, pack_a_##NAME, MR, gemm_pack_no_transpose)                                           \
    GEMM_PACK_DEFINE(T, pack_b_##NAME, NR, gemm_pack_no_transpose)                                           \
                                                                                                             \
    static void tile_##NAME(const void *pa, const void *pb, const void *next, int64_t depth,                  \
                            const gc_gemm_tile_out *to) {                                                    \
        (void)next;                                                                                          \
        for (int64_t row = 0; row < to->rows; row += MR) { /* a tile of MR rows at a time */                 \
            const T *a = (const T *)pa + row * depth, *b = pb, *in = (const T *)to->c_in + row * to->ldc_in; \
            T acc[MR][NR] = {{0}};                                                                           \
            for (int64_t p = 0; p < depth; p++, a += MR, b += NR) {                                          \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                        \
                    _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];          \
            }                                                                                                \
            T *out = (T *)to->c + row * to->ldc, alpha = (T)to->alpha, beta = (T)to->beta;                   \
            int64_t rows = to->rows - row < MR ? to->rows - row : MR;                                        \
            for (int64_t i = 0; i < rows; i++)                                                               \
                for (int64_t j = 0; j < to->cols; j++)                                                       \
                    out[i * to->ldc + j] = beta == 0 ? alpha * acc[i][j]                                     \
                                                     : alpha * acc[i][j] + beta * in[i * to->ldc_in + j];    \
        }                                                                                                    \
    }                                                                                                        \
                                                                                                             \
    const gc_gemm_kernel gc_gemm_portable_##NAME = {sizeof(T), MR, NR, pack_a_##NAME, pack_b_##NAME, tile_##NAME, NULL};

DEFINE_PORTABLE_GEMM(float, f32, 4, 16)
DEFINE_PORTABLE_GEMM(double, f64, 4, 8)
