/* Which vector instructions the CPU kernels may use, chosen once at run time, so that one
 * binary runs on any x86-64 (or other) CPU and uses what the one it runs on offers. The
 * portable C kernels are the reference; GC_CPU_KERNELS=portable (or avx2) caps the choice,
 * to compare against them or to reproduce another machine's results. */
#ifndef GC_TENSOR_CPU_ISA_H
#define GC_TENSOR_CPU_ISA_H

#include <stdbool.h>

typedef enum gc_cpu_isa {
    GC_ISA_PORTABLE, /* plain C (what the compiler's baseline target gives) */
    GC_ISA_AVX2,     /* AVX2 + FMA (x86-64 since 2013) */
    GC_ISA_AVX512,   /* AVX-512F */
    GC_ISA_COUNT
} gc_cpu_isa;

/* The best this CPU and this build offer, within GC_CPU_KERNELS (read once). */
gc_cpu_isa gc_cpu_isa_selected(void);
/* Whether the CPU and the build can run `isa` (ignoring GC_CPU_KERNELS), for tests. */
bool gc_cpu_isa_available(gc_cpu_isa isa);
const char *gc_cpu_isa_name(gc_cpu_isa isa);

#endif
