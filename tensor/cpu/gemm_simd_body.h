/* The SIMD GEMM micro-kernel, written once for every vector width: included by
 * gemm_avx2.c and gemm_avx512.c after they define
 *   T, VEC                   the element and vector types; VL elements per vector
 *   V_LOAD, V_STORE          unaligned load and store of a vector
 *   V_SET1, V_ZERO           a vector of one value, of zeros
 *   V_FMA(a, b, c)           a * b + c rounded once;  V_MUL, V_ADD
 *   GEMM_NAME                the gc_gemm_kernel to define
 * The tile is 6 rows by two vectors: 12 accumulators, two vectors of b and a broadcast of a
 * in 15 of the 16 registers of AVX2 (AVX-512 has 32, but the same tile already keeps both
 * of its FMA units busy). No include guard: it is included once per variant, and undefines
 * the names above at its end, ready for the next one. */

#define MR 6
#define NR (2 * VL)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

GEMM_PACK_DEFINE(T, CAT(GEMM_NAME, _pack_a), MR)
GEMM_PACK_DEFINE(T, CAT(GEMM_NAME, _pack_b), NR)

static void CAT(GEMM_NAME, _tile)(const void *pa, const void *pb, int64_t depth, void *c, int64_t ldc, int64_t rows,
                                  int64_t cols, float alpha, float beta) {
    const T *a = pa, *b = pb;
    for (int64_t i = 0; i < rows; i++) { /* c's rows, ready for the update at the end */
        __builtin_prefetch((const T *)c + i * ldc);
        __builtin_prefetch((const T *)c + i * ldc + cols - 1);
    }
    VEC acc[MR][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = V_ZERO();
    for (int64_t p = 0; p < depth; p++, a += MR, b += NR) {
        VEC b0 = V_LOAD(b), b1 = V_LOAD(b + VL);
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {
            VEC ai = V_SET1(a[i]);
            acc[i][0] = V_FMA(ai, b0, acc[i][0]);
            acc[i][1] = V_FMA(ai, b1, acc[i][1]);
        }
    }
    /* c = alpha acc (+ beta c): a full tile with vectors, an edge tile through a local copy
     * with the same two roundings per element. */
    T *out = c;
    VEC valpha = V_SET1((T)alpha), vbeta = V_SET1((T)beta);
    if (rows == MR && cols == NR) {
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < 2; j++) {
                T *dst = out + i * ldc + j * VL;
                VEC scaled = V_MUL(valpha, acc[i][j]);
                V_STORE(dst, beta == 0 ? scaled : V_ADD(scaled, V_MUL(vbeta, V_LOAD(dst))));
            }
        return;
    }
    T local[MR][NR];
    for (int i = 0; i < MR; i++) {
        V_STORE(local[i], acc[i][0]);
        V_STORE(local[i] + VL, acc[i][1]);
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            T *dst = out + i * ldc + j;
            *dst = beta == 0 ? (T)alpha * local[i][j] : (T)alpha * local[i][j] + (T)beta * *dst;
        }
}

const gc_gemm_kernel GEMM_NAME = {sizeof(T), MR, NR, CAT(GEMM_NAME, _pack_a), CAT(GEMM_NAME, _pack_b),
                                  CAT(GEMM_NAME, _tile)};

#undef MR
#undef NR
#undef CAT_
#undef CAT
#undef T
#undef VEC
#undef VL
#undef V_LOAD
#undef V_STORE
#undef V_SET1
#undef V_ZERO
#undef V_FMA
#undef V_MUL
#undef V_ADD
#undef GEMM_NAME
