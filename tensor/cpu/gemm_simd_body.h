/* The SIMD GEMM micro-kernel, written once for every vector width: included by
 * gemm_avx2.c and gemm_avx512.c after they define
 *   T, VEC                   the element and vector types; VL elements per vector
 *   V_LOAD, V_STORE          unaligned load and store of a vector
 *   V_SET1, V_ZERO           a vector of one value, of zeros
 *   V_FMA(a, b, c)           a * b + c rounded once;  V_MUL, V_ADD
 *   GEMM_NAME                the gc_gemm_kernel to define
 *   PACK_TRANSPOSED          the transposed copy of gemm_pack.h (gemm_pack_no_transpose, or
 *                            the element type's vector transpose)
 *   IN_PLACE_ROWS            the rows of a tile of op(a) read in place: 6 or 12
 * A tile is up to 12 rows by two vectors. Packed panels of op(a) have MR = 6 rows: 12
 * accumulators, two vectors of b and a broadcast of a in 15 of AVX2's 16 registers. AVX-512
 * reads op(a) in place 12 rows at a time (27 of its 32 registers): a product of a dozen rows
 * (one text's tokens) then reads each panel of op(b) once, its multiply hiding the fetch of
 * the next lines, where a second pass of 6 rows left the memory idle (one text on a Zen 4:
 * 4% faster on one thread, 2% on two). Packed panels keep 6 rows, so that one packing serves
 * both widths. No include guard: it is included once per variant, and undefines the names
 * above at its end, ready for the next one. */

#define MR 6
#define TILE_ROWS_MAX (IN_PLACE_ROWS > MR ? IN_PLACE_ROWS : MR)
#define NR (2 * VL)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

GEMM_PACK_DEFINE(T, CAT(GEMM_NAME, _pack_a), MR, PACK_TRANSPOSED)
GEMM_PACK_DEFINE(T, CAT(GEMM_NAME, _pack_b), NR, PACK_TRANSPOSED)

/* The tile for ROWS rows of op(a) (a constant: each count has its own unrolled copy, so an
 * edge tile of a few rows, one text's dozen tokens, costs what its rows do and not a full
 * MR). Row i of op(a) at depth p is a[i * row_stride + p * depth_stride]: a packed panel
 * (1, MR) or op(a) read where it lies (lda, 1). A line of `next` (the next panel of op(b), or
 * pb again) is fetched each step: see gemm_kernel.h. Each element of c gets the same fused products
 * in the same order whatever ROWS and the strides are, so a row's result depends neither on
 * the tile it falls in nor on whether op(a) was packed. */
static inline __attribute__((always_inline)) void CAT(GEMM_NAME, _rows)(const T *a, int64_t row_stride,
                                                                        int64_t depth_stride, const T *b,
                                                                        const T *next, int64_t depth,
                                                                        const gc_gemm_tile_out *to, const int ROWS) {
    T *out = to->c;
    const T *in = to->c_in;
    int64_t ldc = to->ldc, ldc_in = to->ldc_in, cols = to->cols;
    for (int i = 0; i < ROWS; i++) { /* c's rows, ready for the update at the end */
        __builtin_prefetch(in + i * ldc_in);
        __builtin_prefetch(in + i * ldc_in + cols - 1);
    }
    VEC acc[TILE_ROWS_MAX][2];
    for (int i = 0; i < ROWS; i++) acc[i][0] = acc[i][1] = V_ZERO();
    /* Four steps per turn of the loop, so that its pointer updates and branch are paid once
     * per four steps. Interleaved call by call with the rolled loop on MiniLM's products, it
     * took 4-13% less time on the shared 2-core development machine; on a quiet core both ran
     * at about 90% of its peak. Each accumulator still sums in the order of p. */
    /* Rows 4-7 and 8-11 from pointers of their own: each row is then one of three pointers
     * plus 0, 1, 2 or 3 row strides, which x86 addresses from two index registers (the
     * stride, three strides). Addressed as a + i * stride, twelve rows left the compiler too
     * few registers: it reloaded row offsets from the stack inside the loop. */
    const T *a4 = ROWS > 4 ? a + 4 * row_stride : a, *a8 = ROWS > 8 ? a + 8 * row_stride : a;
    _Pragma("GCC unroll 4") for (int64_t p = 0; p < depth;
                                 p++, a += depth_stride, a4 += depth_stride, a8 += depth_stride, b += NR, next += NR) {
        VEC b0 = V_LOAD(b), b1 = V_LOAD(b + VL);
        /* a panel row is NR elements: one cache line for AVX2, two for AVX-512 */
        for (size_t line = 0; line < NR * sizeof(T); line += 64) __builtin_prefetch((const char *)next + line);
        _Pragma("GCC unroll 12") for (int i = 0; i < ROWS; i++) {
            const T *quad = i < 4 ? a : i < 8 ? a4 : a8;
            VEC ai = V_SET1(quad[(i % 4) * row_stride]);
            acc[i][0] = V_FMA(ai, b0, acc[i][0]);
            acc[i][1] = V_FMA(ai, b1, acc[i][1]);
        }
    }
    /* c = alpha acc (+ beta c_in): whole rows with vectors, a partial width through a local
     * copy with the same two roundings per element. A product by 1 is exact, so skipping it
     * where alpha or beta is 1 changes no bit. */
    T alpha = (T)to->alpha, beta = (T)to->beta;
    VEC valpha = V_SET1(alpha), vbeta = V_SET1(beta);
    if (cols == NR) {
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < 2; j++) {
                VEC sum = alpha == 1 ? acc[i][j] : V_MUL(valpha, acc[i][j]);
                if (beta != 0) {
                    VEC c_in = V_LOAD(in + i * ldc_in + j * VL);
                    sum = V_ADD(sum, beta == 1 ? c_in : V_MUL(vbeta, c_in));
                }
                V_STORE(out + i * ldc + j * VL, sum);
            }
        return;
    }
    T local[TILE_ROWS_MAX][NR];
    for (int i = 0; i < ROWS; i++) {
        V_STORE(local[i], acc[i][0]);
        V_STORE(local[i] + VL, acc[i][1]);
    }
    for (int i = 0; i < ROWS; i++)
        for (int64_t j = 0; j < cols; j++)
            out[i * ldc + j] = beta == 0 ? alpha * local[i][j] : alpha * local[i][j] + beta * in[i * ldc_in + j];
}

/* The row tiles of `out` (out->rows rows, tile_rows at a time, the last one by the copy for
 * its count), tile after tile down c; tile i's op(a) starts tile_step elements after tile
 * i - 1's (MR rows of a packed panel, or tile_rows rows of op(a) where it lies). One call per
 * panel of op(b), not per tile: the calls and their set-up took 1.8% of MiniLM's encoding. */
static inline __attribute__((always_inline)) void CAT(GEMM_NAME, _tiles)(const T *a, int64_t row_stride,
                                                                         int64_t depth_stride, int tile_rows,
                                                                         int64_t tile_step, const void *pb,
                                                                         const void *next, int64_t depth,
                                                                         const gc_gemm_tile_out *out) {
    gc_gemm_tile_out tile = *out;
    for (int64_t row = 0; row < out->rows; row += tile_rows, a += tile_step) {
        tile.rows = out->rows - row < tile_rows ? out->rows - row : tile_rows;
#define ROWS_CASE(r) \
    case r: CAT(GEMM_NAME, _rows)(a, row_stride, depth_stride, pb, next, depth, &tile, r); break;
        switch (tile.rows) {
            ROWS_CASE(1) ROWS_CASE(2) ROWS_CASE(3) ROWS_CASE(4) ROWS_CASE(5)
#if TILE_ROWS_MAX == 12
            ROWS_CASE(6) ROWS_CASE(7) ROWS_CASE(8) ROWS_CASE(9) ROWS_CASE(10) ROWS_CASE(11)
#endif
        default: CAT(GEMM_NAME, _rows)(a, row_stride, depth_stride, pb, next, depth, &tile, TILE_ROWS_MAX); break;
        }
#undef ROWS_CASE
        tile.c = (T *)tile.c + tile_rows * tile.ldc;
        tile.c_in = (const T *)tile.c_in + tile_rows * tile.ldc_in;
    }
}
_Static_assert(TILE_ROWS_MAX == 6 || TILE_ROWS_MAX == 12, "the switch has a case per row count");

static void CAT(GEMM_NAME, _tile)(const void *pa, const void *pb, const void *next, int64_t depth,
                                  const gc_gemm_tile_out *out) {
    CAT(GEMM_NAME, _tiles)(pa, 1, MR, MR, MR * depth, pb, next, depth, out);
}

static void CAT(GEMM_NAME, _tile_in_place)(const void *a, int64_t lda, const void *pb, const void *next,
                                           int64_t depth, const gc_gemm_tile_out *out) {
    CAT(GEMM_NAME, _tiles)(a, lda, 1, IN_PLACE_ROWS, IN_PLACE_ROWS * lda, pb, next, depth, out);
}

const gc_gemm_kernel GEMM_NAME = {sizeof(T),
                                  MR,
                                  NR,
                                  CAT(GEMM_NAME, _pack_a),
                                  CAT(GEMM_NAME, _pack_b),
                                  CAT(GEMM_NAME, _tile),
                                  CAT(GEMM_NAME, _tile_in_place)};

#undef MR
#undef IN_PLACE_ROWS
#undef TILE_ROWS_MAX
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
#undef PACK_TRANSPOSED
