/* Fused attention on the CPU (gc_attention_args in ../backend.h, the arithmetic of
 * ../attention_impl.h): tile by tile over the keys with an online softmax, never a
 * [B, H, T, T] array; each thread holds a query tile and a key tile (scratch_cpu.h).
 *
 *  - forward: one task per (text, head, query tile); the tile's rows walk the key tiles,
 *    rescaling their running sum and context when a tile raises a row's max;
 *  - backward (FlashAttention-2): one task per (text, key/value head), which alone writes
 *    its G query heads' dq rows and its dk and dv rows, so nothing is shared between
 *    threads and nothing needs atomics. For each key tile it walks every query row of the
 *    G heads, recomputing the probabilities from the forward's log-sum-exp.
 * A task computes every element the same way whichever thread runs it, so the results do
 * not depend on GC_NUM_THREADS. f16 and bf16 are computed in float, f64 in double. */
#include <math.h>
#include <string.h>

#include "../attention_impl.h"
#include "elem_cpu.h"
#include "erf_cpu.h"
#include "kernels_cpu.h"
#include "scratch_cpu.h"
#include "thread_pool.h"

/* Rows and keys per tile: a tile's keys, values and logits stay in the L1/L2 cache while a
 * query tile's rows run over them. */
#define ATTENTION_QUERY_TILE 64
#define ATTENTION_KEY_TILE 64

/* dst [n] = elements [first, first + n) of src (of dtype) in the working type. */
static void load_float(const void *src, gc_dtype dtype, size_t first, size_t n, float *dst) {
    if (dtype == GC_F32) {
        memcpy(dst, (const float *)src + first, n * sizeof *dst);
        return;
    }
    for (size_t e = 0; e < n; e++) dst[e] = (float)gc_load(src, dtype, first + e);
}

static void load_double(const void *src, gc_dtype dtype, size_t first, size_t n, double *dst) {
    memcpy(dst, (const double *)src + first, n * sizeof *dst); /* only f64 works in double */
    (void)dtype;
}

#define W float
#define WNAME(name) name##_float
#define W_EXP(x) gc_exp_nonpositive_f32(x)
#define W_LOAD load_float
#include "attention_cpu_body.h"
#undef W
#undef WNAME
#undef W_EXP
#undef W_LOAD

#define W double
#define WNAME(name) name##_double
#define W_EXP(x) exp(x)
#define W_LOAD load_double
#include "attention_cpu_body.h"
#undef W
#undef WNAME
#undef W_EXP
#undef W_LOAD

void gc_cpu_attention_forward(const gc_attention_args *args) {
    int64_t tiles = (args->length + ATTENTION_QUERY_TILE - 1) / ATTENTION_QUERY_TILE;
    gc_parallel_fn range = args->dtype == GC_F64 ? forward_range_double : forward_range_float;
    gc_parallel_for(args->batch * args->heads * tiles, 1, range, (void *)args);
}

void gc_cpu_attention_backward(const gc_attention_args *args) {
    gc_parallel_fn range = args->dtype == GC_F64 ? backward_range_double : backward_range_float;
    gc_parallel_for(args->batch * args->kv_heads, 1, range, (void *)args);
}
