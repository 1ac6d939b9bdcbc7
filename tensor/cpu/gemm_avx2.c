/* The GEMM micro-kernels for AVX2 + FMA (this file is compiled with -mavx2 -mfma and only
 * called after a run-time check: see cpu_isa.c). */
#include <immintrin.h>

#include "gemm_kernel.h"
#include "gemm_pack.h"
#include "gemm_transpose_avx2.h"

#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define GEMM_NAME gc_gemm_avx2_f32
#define T float
#define PACK_TRANSPOSED gc_pack_transposed_f32_avx2
#define VEC __m256
#define VL 8
#define V_LOAD _mm256_loadu_ps
#define V_STORE _mm256_storeu_ps
#define V_SET1 _mm256_set1_ps
#define V_ZERO _mm256_setzero_ps
#define V_MUL _mm256_mul_ps
#define V_ADD _mm256_add_ps
#define IN_PLACE_ROWS 6
#include "gemm_simd_body.h"

#define V_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define GEMM_NAME gc_gemm_avx2_f64
#define T double
#define PACK_TRANSPOSED gemm_pack_no_transpose
#define VEC __m256d
#define VL 4
#define V_LOAD _mm256_loadu_pd
#define V_STORE _mm256_storeu_pd
#define V_SET1 _mm256_set1_pd
#define V_ZERO _mm256_setzero_pd
#define V_MUL _mm256_mul_pd
#define V_ADD _mm256_add_pd
#define IN_PLACE_ROWS 6
#include "gemm_simd_body.h"
