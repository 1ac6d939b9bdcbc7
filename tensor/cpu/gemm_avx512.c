/* The GEMM micro-kernels for AVX-512F (this file is compiled with -mavx512f and only called
 * after a run-time check: see cpu_isa.c). The same body as AVX2's, with vectors twice as
 * wide. */
#include <immintrin.h>

#include "gemm_kernel.h"
#include "gemm_pack.h"
#include "gemm_transpose_avx2.h"

#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define GEMM_NAME gc_gemm_avx512_f32
#define T float
#define PACK_TRANSPOSED gc_pack_transposed_f32_avx2
#define VEC __m512
#define VL 16
#define V_LOAD _mm512_loadu_ps
#define V_STORE _mm512_storeu_ps
#define V_SET1 _mm512_set1_ps
#define V_ZERO _mm512_setzero_ps
#define V_MUL _mm512_mul_ps
#define V_ADD _mm512_add_ps
#define IN_PLACE_ROWS 12
#include "gemm_simd_body.h"

#define V_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define GEMM_NAME gc_gemm_avx512_f64
#define T double
#define PACK_TRANSPOSED gemm_pack_no_transpose
#define VEC __m512d
#define VL 8
#define V_LOAD _mm512_loadu_pd
#define V_STORE _mm512_storeu_pd
#define V_SET1 _mm512_set1_pd
#define V_ZERO _mm512_setzero_pd
#define V_MUL _mm512_mul_pd
#define V_ADD _mm512_add_pd
#define IN_PLACE_ROWS 12
#include "gemm_simd_body.h"
