/* The fused attention kernels (attention_cpu.c says how they work) for one instruction set,
 * included once per variant with ATTENTION_VARIANT its name: attention_cpu.c for the
 * portable C (the SSE2 baseline), attention_avx2.c for AVX2 (-mavx2 -mfma
 * -ffp-contract=off). The same C with the same operations and no contraction into FMA, so
 * the variants give the same bits, only wider vectors; each defines
 * gc_cpu_attention_forward_<variant> and gc_cpu_attention_backward_<variant>. */
#include <math.h>
#include <string.h>

/* name_<variant>: the variant's own copy of each function */
#define ATTENTION_GLUE(a, b) a##_##b
#define ATTENTION_XGLUE(a, b) ATTENTION_GLUE(a, b)
#define ATTENTION_NAME(name) ATTENTION_XGLUE(name, ATTENTION_VARIANT)
#define ATTENTION_ENTRY(pass) ATTENTION_XGLUE(gc_cpu_attention_##pass, ATTENTION_VARIANT)

#include "../attention_impl.h"
#include "elem_cpu.h"
#include "erf_cpu.h"
#include "attention_cpu.h"
#include "kernels_cpu.h"
#include "philox_cpu.h"
#include "scratch_cpu.h"
#include "thread_pool.h"

/* Rows and keys per tile: a tile's keys, values and logits stay in the L1/L2 cache while a
 * query tile's rows run over them. */
#define ATTENTION_QUERY_TILE 64
#define ATTENTION_KEY_TILE 64

/* dst [n] = elements [first, first + n) of src (of dtype) in the working type. */
static void ATTENTION_NAME(load_float)(const void *src, gc_dtype dtype, size_t first, size_t n, float *dst) {
    if (dtype == GC_F32) {
        memcpy(dst, (const float *)src + first, n * sizeof *dst);
        return;
    }
    for (size_t e = 0; e < n; e++) dst[e] = (float)gc_load(src, dtype, first + e);
}

static void ATTENTION_NAME(load_double)(const void *src, gc_dtype dtype, size_t first, size_t n, double *dst) {
    memcpy(dst, (const double *)src + first, n * sizeof *dst); /* only f64 works in double */
    (void)dtype;
}

/* words[e n + j] = the dropout word (attention_impl.h) of row first_row + e and key start + j,
 * for e < rows and j < n, from the Philox variant of the selected instruction set: whole
 * rows (n = T) are one run of words, others a run per row. */
static void ATTENTION_NAME(dropout_words)(const gc_attention_args *a, int64_t first_row, int64_t rows, int64_t start, int64_t n,
                          uint32_t *words) {
    gc_philox_batch_fn *philox = gc_philox_batch_for(gc_cpu_isa_selected());
    int64_t runs = n == a->length ? 1 : rows, run_words = n == a->length ? rows * n : n;
    uint32_t batch[GC_PHILOX_BATCH_WORDS];
    for (int64_t run = 0; run < runs; run++) {
        uint64_t first = gc_attention_word(a->offset, first_row + run, a->length, start);
        uint32_t *out = words + run * n;
        for (int64_t done = 0; done < run_words;) {
            uint64_t word = first + (uint64_t)done;
            int64_t lead = (int64_t)(word % 4), take = GC_PHILOX_BATCH_WORDS - lead;
            if (take > run_words - done) take = run_words - done;
            philox(a->seed, word / 4, batch);
            memcpy(out + done, batch + lead, (size_t)take * sizeof *out);
            done += take;
        }
    }
}

#define W float
#define WNAME(name) ATTENTION_NAME(name##_float)
#define W_SHARED(name) name##_float
#define W_EXP(x) gc_exp_nonpositive_f32(x)
#define W_LOAD ATTENTION_NAME(load_float)
#include "attention_cpu_body.h"
#undef W
#undef WNAME
#undef W_SHARED
#undef W_EXP
#undef W_LOAD

#define W double
#define WNAME(name) ATTENTION_NAME(name##_double)
#define W_SHARED(name) name##_double
#define W_EXP(x) exp(x)
#define W_LOAD ATTENTION_NAME(load_double)
#include "attention_cpu_body.h"
#undef W
#undef WNAME
#undef W_SHARED
#undef W_EXP
#undef W_LOAD

void ATTENTION_ENTRY(forward)(const gc_attention_args *args) {
    int64_t tiles = (args->length + ATTENTION_QUERY_TILE - 1) / ATTENTION_QUERY_TILE;
    gc_parallel_fn range = args->dtype == GC_F64 ? ATTENTION_NAME(forward_range_double)
                                                 : ATTENTION_NAME(forward_range_float);
    gc_parallel_for(args->batch * args->heads * tiles, 1, range, (void *)args);
}

void ATTENTION_ENTRY(backward)(const gc_attention_args *args) {
    gc_parallel_fn range = args->dtype == GC_F64 ? ATTENTION_NAME(backward_range_double)
                                                 : ATTENTION_NAME(backward_range_float);
    gc_parallel_for(args->batch * args->kv_heads, 1, range, (void *)args);
}
