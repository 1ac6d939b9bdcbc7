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
 * not depend on GC_NUM_THREADS. f16 and bf16 are computed in float, f64 in double. The loops
 * are attention_cpu_body.h's, built for the baseline here and for AVX2 in attention_avx2.c
 * (the same bits: attention_cpu_variant.h), chosen at run time. */
#include "attention_cpu.h"
#include "cpu_isa.h"
#include "kernels_cpu.h"

#define ATTENTION_VARIANT portable
#include "attention_cpu_variant.h"

typedef void attention_kernel(const gc_attention_args *args);

/* A pass's kernel for `isa`: its AVX2 build where the library has one and isa allows it. */
static attention_kernel *variant(gc_cpu_isa isa, attention_kernel *portable, attention_kernel *avx2) {
    return isa >= GC_ISA_AVX2 && avx2 ? avx2 : portable;
}
#ifdef GC_HAVE_X86_KERNELS
#define AVX2_BUILD(kernel) kernel
#else
#define AVX2_BUILD(kernel) NULL
#endif

void gc_cpu_attention_forward_on(gc_cpu_isa isa, const gc_attention_args *args) {
    variant(isa, gc_cpu_attention_forward_portable, AVX2_BUILD(gc_cpu_attention_forward_avx2))(args);
}

void gc_cpu_attention_backward_on(gc_cpu_isa isa, const gc_attention_args *args) {
    variant(isa, gc_cpu_attention_backward_portable, AVX2_BUILD(gc_cpu_attention_backward_avx2))(args);
}

void gc_cpu_attention_forward(const gc_attention_args *args) {
    gc_cpu_attention_forward_on(gc_cpu_isa_selected(), args);
}

void gc_cpu_attention_backward(const gc_attention_args *args) {
    gc_cpu_attention_backward_on(gc_cpu_isa_selected(), args);
}
