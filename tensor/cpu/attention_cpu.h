/* The fused attention kernels of each instruction set (attention_cpu_variant.h), which
 * attention_cpu.c chooses between at run time like the GEMM's micro-kernels. */
#ifndef GC_TENSOR_ATTENTION_CPU_H
#define GC_TENSOR_ATTENTION_CPU_H

#include "../backend.h"
#include "cpu_isa.h"

/* The kernels of `isa` (an available one; AVX-512 CPUs run the AVX2 ones), for the tests. */
void gc_cpu_attention_forward_on(gc_cpu_isa isa, const gc_attention_args *args);
void gc_cpu_attention_backward_on(gc_cpu_isa isa, const gc_attention_args *args);

void gc_cpu_attention_forward_portable(const gc_attention_args *args);
void gc_cpu_attention_backward_portable(const gc_attention_args *args);
#ifdef GC_HAVE_X86_KERNELS
void gc_cpu_attention_forward_avx2(const gc_attention_args *args);
void gc_cpu_attention_backward_avx2(const gc_attention_args *args);
#endif

#endif
